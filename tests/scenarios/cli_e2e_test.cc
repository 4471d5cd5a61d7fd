// tests/scenarios/cli_e2e_test.cc — end to end: fake daemon -> real engine
// (gRPC) -> `xpu` binary as a subprocess, checking what an operator would
// see.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "engine/testing/fake_daemon.h"

namespace xpu::engine {
namespace {

struct Proc {
  int code;
  std::string output;  // stdout + stderr
};

Proc RunXpu(const std::string& args) {
  std::string cmd = std::string(XPU_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(CliE2eTest, StatusAndRanksShowIngestedRecords) {
  auto e = Engine::Start(testing::TestOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string engine = "--engine 127.0.0.1:" + std::to_string((*e)->port());
  {
    testing::FakeDaemon d((*e)->port(), "node-a");
    ASSERT_TRUE(d.Hello());
    ASSERT_TRUE(d.Send(testing::RankBatch("train-42", 0, 4096, true, 1)));
    ASSERT_TRUE(d.Send(testing::RankBatch("train-42", 1, 1000, true, 2)));
    ASSERT_TRUE(d.Send(testing::RankBatch("train-42", 0, 4, false, 3)));
    ASSERT_TRUE(d.Finish().ok());
  }
  ASSERT_TRUE(testing::WaitFor([&] {
    auto s = (*e)->registry().JobSummaries(false);
    return s.size() == 1 && s[0].records == 5100;
  }));

  Proc st = RunXpu("status --json " + engine);
  ASSERT_EQ(st.code, 0) << st.output;
  EXPECT_NE(st.output.find("\"daemon_id\":\"node-a\""), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("\"records_total\":5100"), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("\"job\":\"train-42\""), std::string::npos) << st.output;
  EXPECT_NE(st.output.find("\"ranks\":2,\"ranks_alive\":2,\"records\":5100"), std::string::npos)
      << st.output;

  Proc rk = RunXpu("ranks --job train-42 --json " + engine);
  ASSERT_EQ(rk.code, 0) << rk.output;
  EXPECT_NE(rk.output.find("{\"rank\":0,\"host\":\"host0\",\"pid\":1000,\"local_rank\":0,"
                           "\"liveness\":\"alive\",\"records\":4100"),
            std::string::npos)
      << rk.output;
  EXPECT_NE(rk.output.find("{\"rank\":1,\"host\":\"host0\",\"pid\":1001,\"local_rank\":1,"
                           "\"liveness\":\"alive\",\"records\":1000"),
            std::string::npos)
      << rk.output;

  Proc human = RunXpu("ranks --job train-42 " + engine);
  ASSERT_EQ(human.code, 0) << human.output;
  EXPECT_NE(human.output.find("RANK"), std::string::npos);
  EXPECT_NE(human.output.find("4100"), std::string::npos) << human.output;

  Proc missing = RunXpu("ranks --job nope " + engine);
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_NE(missing.output.find("no job 'nope'"), std::string::npos) << missing.output;
  (*e)->Shutdown();
}

TEST(CliE2eTest, JobsSurviveEngineRestart) {
  EngineOptions o = testing::TestOptions();
  {
    auto e = Engine::Start(o);
    ASSERT_TRUE(e.ok()) << e.status();
    testing::FakeDaemon d((*e)->port(), "node-a");
    ASSERT_TRUE(d.Hello());
    ASSERT_TRUE(d.Send(testing::RankBatch("old-job", 0, 10, true, 1)));
    ASSERT_TRUE(d.Finish().ok());
    ASSERT_TRUE(testing::WaitFor([&] {
      auto s = (*e)->registry().JobSummaries(false);
      return s.size() == 1 && s[0].records == 10;
    }));
  }  // shutdown persists the last window
  auto e = Engine::Start(o);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string engine = "--engine 127.0.0.1:" + std::to_string((*e)->port());
  Proc all = RunXpu("jobs --all --json " + engine);
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("\"job\":\"old-job\",\"job_name\":\"\",\"state\":\"finished\""),
            std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("\"records\":10"), std::string::npos) << all.output;
  Proc running = RunXpu("jobs --json " + engine);
  ASSERT_EQ(running.code, 0);
  EXPECT_EQ(running.output, "{\"jobs\":[]}\n");
  Proc ranks = RunXpu("ranks --job old-job --json " + engine);
  ASSERT_EQ(ranks.code, 0) << ranks.output;
  EXPECT_NE(ranks.output.find("\"records\":10"), std::string::npos) << ranks.output;
}

TEST(CliE2eTest, TlsAndTokenFlags) {
  const std::string dir = testing::TempPath("tls");
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem", token = dir + "/token";
  std::string gen =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (system(gen.c_str()) != 0) GTEST_SKIP() << "openssl cannot generate a test certificate";
  { std::ofstream(token) << "tok3n\n"; }
  EngineOptions o = testing::TestOptions();
  o.tls_cert = cert;
  o.tls_key = key;
  o.token_file = token;
  // As if the CLI ran on another host: no identity socket to fall back on.
  o.identity_socket = "off";
  auto e = Engine::Start(o);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string engine = "--engine 127.0.0.1:" + std::to_string((*e)->port());

  Proc ok = RunXpu("status --json --tls-ca " + cert + " --token-file " + token + " " + engine);
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("\"engine_id\""), std::string::npos) << ok.output;

  Proc no_token = RunXpu("status --tls-ca " + cert + " " + engine);
  EXPECT_EQ(no_token.code, 1) << no_token.output;
  EXPECT_NE(no_token.output.find("no credential"), std::string::npos) << no_token.output;

  Proc plaintext = RunXpu("status --token-file " + token + " " + engine);
  EXPECT_EQ(plaintext.code, 2) << plaintext.output;
  EXPECT_NE(plaintext.output.find("cannot reach engine at"), std::string::npos) << plaintext.output;
}

TEST(CliE2eTest, UnreachableEngine) {
  // Start and stop an engine to get a port that is certainly closed now.
  int port;
  {
    auto e = Engine::Start(testing::TestOptions());
    ASSERT_TRUE(e.ok());
    port = (*e)->port();
  }
  Proc p = RunXpu("status --engine 127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(p.code, 2) << p.output;
  EXPECT_NE(p.output.find("cannot reach engine at 127.0.0.1:" + std::to_string(port) + ": "),
            std::string::npos)
      << p.output;
}

}  // namespace
}  // namespace xpu::engine
