// engine/auth/local_identity_server.h — the engine's side of
// common/rpc/local_identity.h: a Unix socket in the abstract namespace that
// hands every local connection a token for the uid the kernel reports
// (SO_PEERCRED), nothing read from the peer.
//
// Tokens are 256 random bits (getrandom), valid for `ttl` and only in this
// engine process. The table is bounded (kMaxGrants, and kMaxGrantsPerUid so
// that one user cannot push out another's tokens); the oldest grant of the
// same uid goes first. Membership in the admin group is looked up (passwd,
// getgrouplist) when the token is issued.
//
// Thread-safety: Lookup from any thread; one accept thread of its own.
#ifndef XPU_ENGINE_AUTH_LOCAL_IDENTITY_SERVER_H_
#define XPU_ENGINE_AUTH_LOCAL_IDENTITY_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"

namespace xpu::engine::auth {

struct LocalGrant {
  uint32_t uid = 0;
  bool admin = false;  // root, or a member of the admin group
  uint64_t expires_ns = 0;
};

class LocalIdentityServer {
 public:
  static constexpr size_t kMaxGrants = 65536;
  static constexpr size_t kMaxGrantsPerUid = 256;

  // Listens on the abstract socket `name`. `admin_gid` < 0: no admin group.
  static absl::StatusOr<std::unique_ptr<LocalIdentityServer>> Start(const std::string& name,
                                                                     int64_t admin_gid,
                                                                     uint64_t ttl_ns);
  ~LocalIdentityServer();
  LocalIdentityServer(const LocalIdentityServer&) = delete;
  LocalIdentityServer& operator=(const LocalIdentityServer&) = delete;

  std::optional<LocalGrant> Lookup(std::string_view token, uint64_t now_ns) const;
  const std::string& name() const { return name_; }
  uint64_t issued() const { return issued_; }

  // Issues a token for `uid` (the accept thread's step; tests).
  std::string Issue(uint32_t uid, uint32_t gid, uint64_t now_ns);

 private:
  LocalIdentityServer() = default;
  void Run();
  bool InAdminGroup(uint32_t uid, uint32_t gid) const;

  std::string name_;
  int64_t admin_gid_ = -1;
  uint64_t ttl_ns_ = 0;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, LocalGrant, std::less<>> grants_;  // guarded by mu_
  std::atomic<uint64_t> issued_{0};
};

}  // namespace xpu::engine::auth

#endif  // XPU_ENGINE_AUTH_LOCAL_IDENTITY_SERVER_H_
