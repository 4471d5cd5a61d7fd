// engine/auth/auth_unittest.cc — caller identification and permissions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "common/base/clock.h"
#include "common/rpc/local_identity.h"
#include "engine/auth/authorizer.h"
#include "engine/auth/local_identity_server.h"

namespace xpu::engine::auth {
namespace {

constexpr uint64_t kHour = 3600ull * 1000000000ull;

Authorizer MakeAuthorizer(const LocalIdentityServer* local, AuthorizerOptions o = {}) {
  static const std::map<std::string, int64_t> owners = {
      {"roots-job", 0}, {"alices-job", 1000}, {"unknown-owner", -1}};
  return Authorizer(
      o, local,
      [](const std::string& job) -> std::optional<int64_t> {
        auto it = owners.find(job);
        if (it == owners.end()) return std::nullopt;
        return it->second;
      },
      [] { return RealtimeNs(); });
}

TEST(CallerTest, UsersActOnTheirOwnJobsOnly) {
  Caller alice{"uid 1000", 1000, false, kRead | kAct | kIngest};
  EXPECT_TRUE(alice.MayOnJob(kAct, 1000));
  EXPECT_FALSE(alice.MayOnJob(kAct, 0));
  EXPECT_FALSE(alice.MayOnJob(kRead, -1));  // unknown owner: all-jobs callers only
  EXPECT_FALSE(alice.MayOnJob(kAdmin, 1000));
  Caller reader = *RoleCaller("read", "role read");
  EXPECT_TRUE(reader.MayOnJob(kRead, 0));
  EXPECT_FALSE(reader.MayOnJob(kAct, 0));
  EXPECT_TRUE(RoleCaller("admin", "")->MayOnJob(kAct, 7));
  EXPECT_FALSE(RoleCaller("admin", "")->Has(kIngest));
  EXPECT_FALSE(RoleCaller("ingest", "")->Has(kRead));
  EXPECT_FALSE(RoleCaller("root", "").has_value());
}

TEST(CallerTest, CommandCallerCarriesScope) {
  Caller alice{"uid 1000", 1000, false, kRead | kAct};
  xpu::v1::CommandCaller c = ToCommandCaller(alice);
  EXPECT_EQ(c.uid(), 1000);
  EXPECT_FALSE(c.all_jobs());
  EXPECT_FALSE(c.engine());
  EXPECT_FALSE(ToCommandCaller(*RoleCaller("read", "r")).all_jobs());  // read cannot act
  EXPECT_TRUE(ToCommandCaller(*RoleCaller("act", "a")).all_jobs());
  EXPECT_TRUE(EngineCaller().engine());
}

TEST(AuthorizerTest, TokensMapToTheirRoles) {
  AuthorizerOptions o;
  o.shared_token = "shared-secret";
  o.read_token = "read-secret";
  o.admin_token = "admin-secret";
  o.ingest_token = "ingest-secret";
  Authorizer a = MakeAuthorizer(nullptr, o);
  EXPECT_EQ(a.IdentifyToken("read-secret", nullptr).permissions, kRead);
  EXPECT_EQ(a.IdentifyToken("admin-secret", nullptr).permissions, kRead | kAct | kAdmin);
  EXPECT_EQ(a.IdentifyToken("ingest-secret", nullptr).permissions, kIngest);
  EXPECT_EQ(a.IdentifyToken("shared-secret", nullptr).permissions, kAll);
  EXPECT_EQ(a.IdentifyToken("read-secre", nullptr).permissions, 0u);
  EXPECT_EQ(a.IdentifyToken("", nullptr).permissions, 0u);
  EXPECT_EQ(a.IdentifyToken("local1.0123", nullptr).permissions, 0u);  // no identity server
  // Unset role tokens match nothing, not the empty string.
  EXPECT_EQ(a.IdentifyToken("", nullptr).name, "anonymous");
}

TEST(AuthorizerTest, JobChecksSayWhy) {
  Authorizer a = MakeAuthorizer(nullptr);
  Caller alice{"uid 1000", 1000, false, kRead | kAct | kIngest};
  EXPECT_TRUE(a.CheckJob(alice, kAct, "alices-job").ok());
  grpc::Status st = a.CheckJob(alice, kAct, "roots-job");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("uid 1000 may not act on job 'roots-job'"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(a.CheckJob(alice, kRead, "no-such-job").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(a.CheckJob(Caller{}, kRead, "alices-job").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(a.MayOnJob(alice, kRead, "unknown-owner"));
  EXPECT_TRUE(a.MayOnJob(*RoleCaller("read", "r"), kRead, "unknown-owner"));
}

TEST(LocalIdentityServerTest, IssuesTokensForTheKernelsUid) {
  const std::string name = "xpu-engine-auth-test-" + std::to_string(getpid());
  auto server = LocalIdentityServer::Start(name, /*admin_gid=*/-1, kHour);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::string> token = rpc::FetchLocalIdentityFrom(name, 2000);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(token->rfind("local1.", 0), 0u);
  EXPECT_EQ(token->size(), 7u + 64u);
  std::optional<LocalGrant> g = (*server)->Lookup(*token, RealtimeNs());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->uid, geteuid());
  EXPECT_EQ(g->admin, geteuid() == 0);
  Authorizer a = MakeAuthorizer(server->get());
  Caller c = a.IdentifyToken(*token, nullptr);
  EXPECT_EQ(c.uid, static_cast<int64_t>(geteuid()));
  EXPECT_TRUE(c.Has(kIngest));
  // Another token each time; a guessed or expired one is nobody.
  EXPECT_NE(*rpc::FetchLocalIdentityFrom(name, 2000), *token);
  EXPECT_FALSE((*server)->Lookup("local1.ffff", RealtimeNs()).has_value());
  EXPECT_FALSE((*server)->Lookup(*token, RealtimeNs() + 2 * kHour).has_value());
  // A second engine cannot take the same name.
  EXPECT_FALSE(LocalIdentityServer::Start(name, -1, kHour).ok());
}

TEST(LocalIdentityServerTest, OneUserCannotPushOutAnothersTokens) {
  auto server = LocalIdentityServer::Start("xpu-engine-auth-bound-" + std::to_string(getpid()),
                                           -1, kHour);
  ASSERT_TRUE(server.ok());
  const uint64_t now = RealtimeNs();
  const std::string bob = (*server)->Issue(2000, 2000, now);
  for (size_t i = 0; i < LocalIdentityServer::kMaxGrantsPerUid + 50; ++i)
    (*server)->Issue(1000, 1000, now + i);
  EXPECT_TRUE((*server)->Lookup(bob, now).has_value());
}

}  // namespace
}  // namespace xpu::engine::auth
