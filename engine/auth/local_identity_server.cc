// engine/auth/local_identity_server.cc — see local_identity_server.h.
#include "engine/auth/local_identity_server.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/rpc/local_identity.h"

namespace xpu::engine::auth {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("identity");
  return log;
}

std::string RandomToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";  // no entropy: no token (the caller stays anonymous)
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string t = rpc::kLocalTokenPrefix;
  for (unsigned char b : bytes) {
    t.push_back(kHex[b >> 4]);
    t.push_back(kHex[b & 15]);
  }
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalIdentityServer>> LocalIdentityServer::Start(
    const std::string& name, int64_t admin_gid, uint64_t ttl_ns) {
  std::unique_ptr<LocalIdentityServer> s(new LocalIdentityServer());
  s->name_ = name;
  s->admin_gid_ = admin_gid;
  s->ttl_ns_ = ttl_ns;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path))
    return absl::InvalidArgumentError(absl::StrCat("identity socket name '", name, "'"));
  memcpy(addr.sun_path + 1, name.data(), name.size());
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  s->fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  if (bind(s->fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "identity socket @", name, ": ", strerror(errno),
        " (another engine on this port, or a process holding the name; --identity-socket "
        "names another or turns it off)"));
  }
  if (listen(s->fd_, 128) != 0) return absl::InternalError(absl::StrCat("listen: ", strerror(errno)));
  if (pipe2(s->wake_, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError("pipe2");
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

LocalIdentityServer::~LocalIdentityServer() {
  if (thread_.joinable()) {
    const char b = 1;
    (void)!write(wake_[1], &b, 1);
    thread_.join();
  }
  for (int fd : {fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

bool LocalIdentityServer::InAdminGroup(uint32_t uid, uint32_t gid) const {
  if (admin_gid_ < 0) return false;
  if (gid == static_cast<uint32_t>(admin_gid_)) return true;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  return std::find(groups.begin(), groups.end(), static_cast<gid_t>(admin_gid_)) != groups.end();
}

std::string LocalIdentityServer::Issue(uint32_t uid, uint32_t gid, uint64_t now_ns) {
  std::string token = RandomToken();
  if (token.empty()) return token;
  LocalGrant g;
  g.uid = uid;
  g.admin = uid == 0 || InAdminGroup(uid, gid);
  g.expires_ns = now_ns + ttl_ns_;
  std::lock_guard<std::mutex> l(mu_);
  size_t of_uid = 0;
  auto oldest = grants_.end();
  for (auto it = grants_.begin(); it != grants_.end();) {
    if (it->second.expires_ns <= now_ns) {
      it = grants_.erase(it);
      continue;
    }
    if (it->second.uid == uid) {
      ++of_uid;
      if (oldest == grants_.end() || it->second.expires_ns < oldest->second.expires_ns) oldest = it;
    }
    ++it;
  }
  if (of_uid >= kMaxGrantsPerUid && oldest != grants_.end()) grants_.erase(oldest);
  if (grants_.size() >= kMaxGrants) return "";  // full of other users' live tokens
  grants_.emplace(token, g);
  ++issued_;
  return token;
}

std::optional<LocalGrant> LocalIdentityServer::Lookup(std::string_view token,
                                                      uint64_t now_ns) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = grants_.find(token);
  if (it == grants_.end() || it->second.expires_ns <= now_ns) return std::nullopt;
  return it->second;
}

void LocalIdentityServer::Run() {
  for (;;) {
    pollfd p[2] = {{wake_[0], POLLIN, 0}, {fd_, POLLIN, 0}};
    const int rc = poll(p, 2, -1);
    if (rc < 0 && errno != EINTR) break;
    if (p[0].revents & POLLIN) break;
    if (!(p[1].revents & POLLIN)) continue;
    for (;;) {
      const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) break;
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        const std::string token = Issue(cred.uid, cred.gid, RealtimeNs());
        if (!token.empty()) {
          const std::string line =
              absl::StrCat(rpc::kLocalIdentityMagic, " 1 ", token, " ",
                           (RealtimeNs() + ttl_ns_) / 1000000000ull, "\n");
          // Non-blocking and short: a peer that does not read loses its token.
          (void)send(c, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
          Log()->warn("no identity token for uid {}: table full or no entropy", cred.uid);
        }
      }
      close(c);
    }
  }
}

}  // namespace xpu::engine::auth
