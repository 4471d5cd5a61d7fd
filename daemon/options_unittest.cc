#include "daemon/options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace xpu::daemon {
namespace {

TEST(DaemonOptionsTest, DefaultsMatchTheDocumentedValues) {
  auto o = ParseDaemonOptions({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->engine, "127.0.0.1:7441");
  EXPECT_EQ(o->history_records, 131072u);
  EXPECT_EQ(o->retain_exited_s, 600u);
  EXPECT_EQ(o->window_s, 5u);
  EXPECT_EQ(o->flush_ms, 1000u);
  EXPECT_EQ(o->buffer_mb, 64u);
  EXPECT_FALSE(o->foreground);
  EXPECT_FALSE(o->no_engine);
}

TEST(DaemonOptionsTest, BothValueSyntaxesAndBooleans) {
  auto o =
      ParseDaemonOptions({"--socket", "/tmp/s.sock", "--engine=10.0.0.1:1", "--history-records=42",
                          "--window-s", "7", "--foreground", "--no-engine", "--insecure"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->socket, "/tmp/s.sock");
  EXPECT_EQ(o->engine, "10.0.0.1:1");
  EXPECT_EQ(o->history_records, 42u);
  EXPECT_EQ(o->window_s, 7u);
  EXPECT_TRUE(o->foreground);
  EXPECT_TRUE(o->no_engine);
  EXPECT_TRUE(o->insecure);
}

TEST(DaemonOptionsTest, Errors) {
  EXPECT_FALSE(ParseDaemonOptions({"--bogus"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--window-s"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--window-s", "0"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--history-records=-1"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--buffer-mb", "lots"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--foreground=yes"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"positional"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--log-level", "loud"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--tls-cert", "c.pem"}).ok());
}

TEST(DaemonOptionsTest, MetricsStayOnLoopbackUnlessAllowed) {
  EXPECT_TRUE(ParseDaemonOptions({"--metrics-addr=127.0.0.1:0"}).ok());
  EXPECT_TRUE(ParseDaemonOptions({"--metrics-addr=localhost:9465"}).ok());
  auto any = ParseDaemonOptions({"--metrics-addr=0.0.0.0:9465"});
  EXPECT_EQ(any.status().code(), absl::StatusCode::kFailedPrecondition) << any.status();
  EXPECT_NE(any.status().message().find("--metrics-allow-remote"), std::string::npos);
  EXPECT_FALSE(ParseDaemonOptions({"--metrics-addr=:9465"}).ok());  // every address
  EXPECT_FALSE(ParseDaemonOptions({"--metrics-addr=10.1.2.3:9465"}).ok());
  EXPECT_FALSE(ParseDaemonOptions({"--metrics-addr=127.0.0.1.invalid:9465"}).ok());
  auto allowed = ParseDaemonOptions({"--metrics-addr=0.0.0.0:9465", "--metrics-allow-remote"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_TRUE(allowed->metrics_allow_remote);
  EXPECT_TRUE(ParseDaemonOptions({"--metrics-addr=0.0.0.0:9465", "--help"}).ok());
}

TEST(DaemonOptionsTest, HelpMentionsEveryFlag) {
  const std::string help = DaemonHelpText();
  for (const char* f :
       {"--socket", "--engine", "--no-engine", "--token-file", "--tls-ca", "--tls-cert",
        "--tls-key", "--insecure", "--history-records", "--retain-exited-s", "--window-s",
        "--flush-ms", "--buffer-mb", "--foreground", "--metrics-addr", "--metrics-allow-remote",
        "--help"}) {
    EXPECT_NE(help.find(f), std::string::npos) << f;
  }
  EXPECT_NE(help.find("[131072]"), std::string::npos);
}

TEST(DaemonOptionsTest, TokenFromFileThenEnvironment) {
  char path[] = "/tmp/xpu-token-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "  tok3n\n", 8), 8);
  close(fd);
  setenv("XPU_TOKEN", "from-env", 1);
  DaemonOptions o;
  EXPECT_EQ(ResolveToken(o).value(), "from-env");
  o.token_file = path;
  EXPECT_EQ(ResolveToken(o).value(), "tok3n");
  o.token_file = "/nonexistent/token";
  EXPECT_FALSE(ResolveToken(o).ok());
  unsetenv("XPU_TOKEN");
  unlink(path);
}

}  // namespace
}  // namespace xpu::daemon
