// engine/auth/authorizer.h — identifies the caller of every engine call and
// checks its permission at the edge (docs/security.md).
//
// Credentials, in the order they are tried:
//   1. a token (x-xpu-token metadata; DaemonHello.token for Ingest): a
//      per-role token (--read/--act/--admin/--ingest-token-file), the
//      shared --token-file (every role), or a local identity token from
//      the engine's identity socket (local_identity_server.h);
//   2. a verified client certificate (--tls-client-ca) whose common name is
//      xpu-read, xpu-act, xpu-admin or xpu-ingest.
// Nothing else: a caller without a credential is anonymous and may do
// nothing, on loopback too. Token comparisons take constant time.
//
// Jobs belong to the uid of their processes (ProcessIdentity.uid, which the
// daemon takes from SO_PEERCRED); `owner_of` answers for live and historical
// jobs.
//
// Thread-safety: immutable after construction; the owner lookup and the
// local identity server are thread-safe.
#ifndef XPU_ENGINE_AUTH_AUTHORIZER_H_
#define XPU_ENGINE_AUTH_AUTHORIZER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "engine/auth/caller.h"
#include "engine/auth/local_identity_server.h"

namespace xpu::engine::auth {

struct AuthorizerOptions {
  std::string shared_token;  // every permission on every job
  std::string read_token;
  std::string act_token;
  std::string admin_token;
  std::string ingest_token;
  // Client certificates are verified (--tls-client-ca): their common name
  // may carry a role.
  bool certificate_roles = false;
};

class Authorizer {
 public:
  // The uid owning `job`; nullopt for a job the engine does not know, -1 for
  // one whose owner is unknown (only all-jobs callers may touch it).
  using OwnerOf = std::function<std::optional<int64_t>(const std::string& job)>;
  using Now = std::function<uint64_t()>;

  Authorizer(AuthorizerOptions options, const LocalIdentityServer* local, OwnerOf owner_of,
             Now now);
  // The identity socket starts once the engine knows its port, after the
  // services exist: set once, before or while calls arrive.
  void SetLocalIdentity(const LocalIdentityServer* local) { local_.store(local); }

  // The caller of a gRPC call (metadata token, then certificate).
  Caller Identify(const grpc::ServerContext& ctx) const;
  // The caller behind `token` (Ingest: DaemonHello.token); `ctx` for the
  // certificate when the token says nothing.
  Caller IdentifyToken(std::string_view token, const grpc::ServerContextBase* ctx) const;

  // OK (with *caller) when the caller holds `p` (on some job at least);
  // UNAUTHENTICATED without a credential, PERMISSION_DENIED without `p`.
  grpc::Status Require(const grpc::ServerContext& ctx, Permission p, Caller* caller) const;
  // `p` on `job`: also NOT_FOUND for a job the engine does not know, and
  // PERMISSION_DENIED for another user's job.
  grpc::Status RequireJob(const grpc::ServerContext& ctx, Permission p, const std::string& job,
                          Caller* caller) const;
  // The same check for a caller already identified (filters of lists).
  bool MayOnJob(const Caller& c, Permission p, const std::string& job) const;
  grpc::Status CheckJob(const Caller& c, Permission p, const std::string& job) const;

 private:
  const AuthorizerOptions options_;
  std::atomic<const LocalIdentityServer*> local_;  // may be null
  const OwnerOf owner_of_;
  const Now now_;
};

// Caller for a role name ("read", "act", "admin", "ingest"); nullopt when
// unknown. Public for the certificate rule and tests.
std::optional<Caller> RoleCaller(std::string_view role, std::string name);

}  // namespace xpu::engine::auth

#endif  // XPU_ENGINE_AUTH_AUTHORIZER_H_
