// engine/auth/authorizer.cc — see authorizer.h.
#include "engine/auth/authorizer.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/local_identity.h"
#include "common/rpc/token.h"

namespace xpu::engine::auth {
namespace {

const char kNoCredential[] =
    "no credential: on the engine's host the xpu CLI identifies you by itself (the engine's "
    "identity socket); elsewhere give --token-file or a client certificate (docs/security.md)";

const char* PermissionName(Permission p) {
  switch (p) {
    case kRead:
      return "read";
    case kAct:
      return "act on";
    case kAdmin:
      return "administer";
    case kIngest:
      return "send records for";
    default:
      return "use";
  }
}

}  // namespace

xpu::v1::CommandCaller ToCommandCaller(const Caller& c) {
  xpu::v1::CommandCaller out;
  out.set_uid(c.uid);
  out.set_all_jobs(c.all_jobs && c.Has(kAct));
  out.set_name(c.name);
  return out;
}

xpu::v1::CommandCaller EngineCaller() {
  xpu::v1::CommandCaller out;
  out.set_uid(-1);
  out.set_engine(true);
  out.set_name("engine");
  return out;
}

std::optional<Caller> RoleCaller(std::string_view role, std::string name) {
  Caller c;
  c.name = std::move(name);
  c.all_jobs = true;
  if (role == "read") {
    c.permissions = kRead;
  } else if (role == "act") {
    c.permissions = kRead | kAct;
  } else if (role == "admin") {
    c.permissions = kRead | kAct | kAdmin;
  } else if (role == "ingest") {
    c.permissions = kIngest;
  } else {
    return std::nullopt;
  }
  return c;
}

Authorizer::Authorizer(AuthorizerOptions options, const LocalIdentityServer* local,
                       OwnerOf owner_of, Now now)
    : options_(std::move(options)),
      local_(local),
      owner_of_(std::move(owner_of)),
      now_(std::move(now)) {}

Caller Authorizer::IdentifyToken(std::string_view token,
                                 const grpc::ServerContextBase* ctx) const {
  if (!token.empty()) {
    const LocalIdentityServer* local = local_.load();
    if (local != nullptr && token.rfind(rpc::kLocalTokenPrefix, 0) == 0) {
      if (std::optional<LocalGrant> g = local->Lookup(token, now_())) {
        Caller c;
        c.uid = g->uid;
        c.name = absl::StrCat("uid ", g->uid);
        if (g->admin) {
          c.all_jobs = true;
          c.permissions = kAll;
          c.name += g->uid == 0 ? " (root)" : " (admin group)";
        } else {
          c.permissions = kRead | kAct | kIngest;
        }
        return c;
      }
    }
    // Every role token is compared (constant time each), whatever matched.
    std::optional<Caller> found;
    if (rpc::TokensEqual(token, options_.shared_token)) {
      found = Caller{"shared token", -1, true, kAll};
    }
    const std::pair<const std::string*, const char*> roles[] = {
        {&options_.admin_token, "admin"},
        {&options_.act_token, "act"},
        {&options_.read_token, "read"},
        {&options_.ingest_token, "ingest"}};
    for (const auto& [secret, role] : roles) {
      if (rpc::TokensEqual(token, *secret) && !found)
        found = RoleCaller(role, absl::StrCat("role ", role));
    }
    if (found) return *found;
  }
  if (ctx != nullptr && options_.certificate_roles) {
    std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
    if (auth && auth->IsPeerAuthenticated()) {
      for (const grpc::string_ref& cn : auth->FindPropertyValues("x509_common_name")) {
        const std::string name(cn.data(), cn.size());
        if (name.rfind("xpu-", 0) != 0) continue;
        if (std::optional<Caller> c = RoleCaller(name.substr(4), "certificate " + name)) return *c;
      }
    }
  }
  return Caller{};
}

Caller Authorizer::Identify(const grpc::ServerContext& ctx) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find(rpc::kTokenMetadataKey);
  std::string_view token;
  if (it != md.end()) token = std::string_view(it->second.data(), it->second.size());
  return IdentifyToken(token, &ctx);
}

grpc::Status Authorizer::Require(const grpc::ServerContext& ctx, Permission p,
                                 Caller* caller) const {
  *caller = Identify(ctx);
  if (caller->permissions == 0)
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kNoCredential);
  if (!caller->Has(p)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(caller->name, " may not ", PermissionName(p), " jobs here"));
  }
  return grpc::Status::OK;
}

grpc::Status Authorizer::CheckJob(const Caller& c, Permission p, const std::string& job) const {
  if (c.permissions == 0) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kNoCredential);
  const std::optional<int64_t> owner = owner_of_ ? owner_of_(job) : std::nullopt;
  if (!owner) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", job, "'"));
  }
  if (c.MayOnJob(p, *owner)) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(c.name, " may not ", PermissionName(p), " job '", job, "'",
                   *owner >= 0 ? absl::StrCat(" (it runs as uid ", *owner, ")") : std::string()));
}

grpc::Status Authorizer::RequireJob(const grpc::ServerContext& ctx, Permission p,
                                    const std::string& job, Caller* caller) const {
  *caller = Identify(ctx);
  return CheckJob(*caller, p, job);
}

bool Authorizer::MayOnJob(const Caller& c, Permission p, const std::string& job) const {
  const std::optional<int64_t> owner = owner_of_ ? owner_of_(job) : std::nullopt;
  return c.MayOnJob(p, owner.value_or(-1));
}

}  // namespace xpu::engine::auth
