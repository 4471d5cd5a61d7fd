#include "engine/engine_options.h"

#include <gtest/gtest.h>

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
  EXPECT_NE(st.message().find("non-loopback"), std::string::npos);
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
}

}  // namespace
}  // namespace xpu::engine
