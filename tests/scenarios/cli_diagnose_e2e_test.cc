// `xpu diagnose` and `xpu report` (the real binary, run as a subprocess)
// against an engine that diagnosed a synthetic slow-GPU job fed through the
// real ingest path.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <chrono>

#include <cstdio>
#include <iostream>

#include "absl/strings/match.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/synthetic_job.h"

namespace xpu::scenarios {
namespace {

std::string RunCommand(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(CliDiagnoseE2eTest, DiagnoseAndReportShowTheSlowGpu) {
  auto started = engine::Engine::Start(engine::testing::TestOptions());
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<engine::Engine> eng = std::move(*started);
  engine::testing::FakeDaemon daemon(eng->port(), "cli-daemon");
  ASSERT_TRUE(daemon.Hello());
  SyntheticJobSpec spec;
  spec.job = "cli-job";
  spec.ranks = 8;
  spec.fault.slow_gpu_ranks = {5};
  SyntheticJob job(spec,
                   static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()));
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(daemon.Send(job.NextWindow(5)));
    const uint64_t want = job.records_emitted();
    ASSERT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng->registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(60)));
    eng->TickWindow();
  }
  const std::string base =
      std::string(XPU_CLI_PATH) + " --engine 127.0.0.1:" + std::to_string(eng->port());
  int code = -1;
  std::string json = RunCommand(base + " diagnose --job cli-job --json", &code);
  EXPECT_EQ(code, 0) << json;
  EXPECT_TRUE(
      absl::StrContains(json, R"("kind":"slow_gpu","subject":"rank:5","team":"operations")"))
      << json;
  EXPECT_TRUE(absl::StrContains(json, R"("active":true,"ranks":[5])")) << json;
  std::string table = RunCommand(base + " diagnose --job cli-job", &code);
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(table, "slow_gpu")) << table;
  std::string report = RunCommand(base + " report --job cli-job", &code);
  EXPECT_EQ(code, 0) << report;
  EXPECT_TRUE(absl::StrContains(report, "XPUTimer slowdown report for job cli-job")) << report;
  EXPECT_TRUE(absl::StrContains(report, "For the operations team:")) << report;
  EXPECT_TRUE(absl::StrContains(report, "8 of 8 ranks alive on 2 host(s)")) << report;
  std::string missing = RunCommand(base + " diagnose --job no-such-job", &code);
  EXPECT_EQ(code, 1) << missing;
  std::cout << report;
  daemon.Finish();
}

}  // namespace
}  // namespace xpu::scenarios
