#include "engine/engine_options.h"

#include <gtest/gtest.h>

#include <fstream>

#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"

namespace xpu::engine {
namespace {

TEST(EngineOptionsTest, DefaultsAndParsing) {
  auto o = ParseEngineFlags({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->listen, "127.0.0.1:7441");
  EXPECT_EQ(o->metrics_addr, "127.0.0.1:9464");
  EXPECT_EQ(o->db, "./xpu-engine.db");
  EXPECT_EQ(o->silent_after_s, 30);
  EXPECT_EQ(o->max_receive_bytes, 64ull << 20);
  o = ParseEngineFlags(
      {"--listen=0.0.0.0:1", "--db", "/tmp/x.db", "--silent-after-s=5", "--max-receive-mb", "2"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->listen, "0.0.0.0:1");
  EXPECT_EQ(o->db, "/tmp/x.db");
  EXPECT_EQ(o->silent_after_s, 5);
  EXPECT_EQ(o->max_receive_bytes, 2ull << 20);
  EXPECT_FALSE(ParseEngineFlags({"--bogus=1"}).ok());
  EXPECT_FALSE(ParseEngineFlags({"--window-s=-1"}).ok());
  EXPECT_FALSE(ParseEngineFlags({"--db"}).ok());
  EXPECT_TRUE(ParseEngineFlags({"--help"})->help);
}

// A window is analysed a grace after its end: by default a tenth of the
// window, at most 3 s; given, shorter than the window.
TEST(EngineOptionsTest, WindowGrace) {
  EXPECT_DOUBLE_EQ(ParseEngineFlags({})->WindowGraceS(), 1.0);
  EXPECT_DOUBLE_EQ(ParseEngineFlags({"--window-s=60"})->WindowGraceS(), 3.0);
  EXPECT_DOUBLE_EQ(ParseEngineFlags({"--window-s=2"})->WindowGraceS(), 0.2);
  EXPECT_DOUBLE_EQ(ParseEngineFlags({"--window-grace-s=0"})->WindowGraceS(), 0.0);
  EXPECT_DOUBLE_EQ(ParseEngineFlags({"--window-grace-s=4"})->WindowGraceS(), 4.0);
  const auto bad = ParseEngineFlags({"--window-s=5", "--window-grace-s=5"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be shorter than --window-s"), std::string::npos);
  EXPECT_EQ(ParseEngineFlags({})->window_nice, 5);
  EXPECT_FALSE(ParseEngineFlags({"--window-nice=20"}).ok());
}

TEST(EngineOptionsTest, Loopback) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7441"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7441"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7441"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/run/xpu.sock"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7441"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7441"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:7441"));
  EXPECT_FALSE(IsLoopbackAddress("engine.example.com:7441"));
}

TEST(EngineOptionsTest, SecurityRules) {
  EngineOptions o;
  EXPECT_TRUE(ValidateSecurity(o).ok());
  o.listen = "0.0.0.0:7441";
  absl::Status st = ValidateSecurity(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("without protection"), std::string::npos);
  o.token_file = "/etc/xpu/token";
  EXPECT_TRUE(ValidateSecurity(o).ok());
  o.token_file.clear();
  o.tls_cert = "c.pem";
  EXPECT_FALSE(ValidateSecurity(o).ok()) << "cert without key";
  o.tls_key = "k.pem";
  EXPECT_TRUE(ValidateSecurity(o).ok());
  EngineOptions ca;
  ca.tls_client_ca = "ca.pem";
  EXPECT_FALSE(ValidateSecurity(ca).ok()) << "client CA without TLS";

  // A name is loopback only if everything it resolves to is.
  EngineOptions named;
  named.listen = "127.evil.invalid:7441";
  EXPECT_EQ(ValidateSecurity(named).code(), absl::StatusCode::kFailedPrecondition);
  named.listen = "localhost:7441";
  EXPECT_TRUE(ValidateSecurity(named).ok());

  // /metrics carries job names unauthenticated: remote only on purpose.
  EngineOptions m;
  m.metrics_addr = "0.0.0.0:9464";
  st = ValidateSecurity(m);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("--metrics-allow-remote"), std::string::npos) << st.message();
  m.metrics_allow_remote = true;
  EXPECT_TRUE(ValidateSecurity(m).ok());
  m.metrics_addr = "off";
  m.metrics_allow_remote = false;
  EXPECT_TRUE(ValidateSecurity(m).ok());

  // Nobody could call an engine without its identity socket and credentials.
  EngineOptions closed;
  closed.identity_socket = "off";
  EXPECT_FALSE(ValidateSecurity(closed).ok());
  closed.read_token_file = "/etc/xpu/read-token";
  EXPECT_TRUE(ValidateSecurity(closed).ok());
}

TEST(EngineOptionsTest, VersionHelpAndAlertFlags) {
  auto v = ParseEngineFlags({"--version"});
  ASSERT_TRUE(v.ok()) << v.status();  // it used to be "--version needs a value"
  EXPECT_TRUE(v->version);
  const std::string help = EngineUsage();
  for (const char* f :
       {"--listen", "--db", "--window-s", "--alertmanager-url", "--alertmanager-basic-auth-file",
        "--webhook-bearer-token-file", "--alert-tls-ca", "--version", "--help"}) {
    EXPECT_NE(help.find(f), std::string::npos) << f;
  }
  EXPECT_NE(help.find("[127.0.0.1:7441]"), std::string::npos) << help;
  auto o = ParseEngineFlags({"--alertmanager-url=https://am:9093",
                             "--alertmanager-bearer-token-file", "/etc/xpu/am-token",
                             "--webhook-url", "https://hooks/xpu", "--webhook-basic-auth-file",
                             "/etc/xpu/hook-auth", "--alert-tls-ca", "/etc/xpu/ca.pem"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->alertmanager_url, "https://am:9093");
  EXPECT_EQ(o->alertmanager_bearer_token_file, "/etc/xpu/am-token");
  EXPECT_EQ(o->webhook_basic_auth_file, "/etc/xpu/hook-auth");
  EXPECT_EQ(o->alert_tls_ca, "/etc/xpu/ca.pem");
}

TEST(EngineOptionsTest, AlertCredentialsAreCheckedAtStart) {
  const std::string basic = testing::TempPath("am-auth"), bearer = testing::TempPath("am-token");
  std::ofstream(basic) << "user:pass\n";
  std::ofstream(bearer) << "token\n";
  EngineOptions both = testing::TestOptions();
  both.alertmanager_url = "https://127.0.0.1:9";
  both.alertmanager_basic_auth_file = basic;
  both.alertmanager_bearer_token_file = bearer;
  EXPECT_FALSE(Engine::Start(both).ok()) << "basic and bearer for one receiver";
  EngineOptions no_url = testing::TestOptions();
  no_url.webhook_bearer_token_file = bearer;
  EXPECT_FALSE(Engine::Start(no_url).ok()) << "credentials without a URL";
  EngineOptions missing = testing::TestOptions();
  missing.webhook_url = "https://127.0.0.1:9/xpu";
  missing.webhook_basic_auth_file = testing::TempPath("no-such-file");
  EXPECT_FALSE(Engine::Start(missing).ok()) << "unreadable credentials";
  EngineOptions ok = testing::TestOptions();
  ok.alertmanager_url = "https://127.0.0.1:9";
  ok.alertmanager_basic_auth_file = basic;
  auto e = Engine::Start(ok);
  EXPECT_TRUE(e.ok()) << e.status();
}

}  // namespace
}  // namespace xpu::engine
