#include "engine/detectors/throughput_regression.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1;

class ThroughputRegressionTest : public ::testing::Test {
 protected:
  // Four windows at 10 ms: the job's best, and enough earlier 10-step means
  // that a regression is not taken for the job's own spread.
  void Healthy() {
    for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(10 * kMs).empty());
  }
  void UseHistory(double previous_step_s) {
    auto source = std::make_shared<FixedHistory>();
    history::RunBaseline run;
    run.step_median_s = previous_step_s;
    run.step_best_s = previous_step_s;
    source->AddRuns(2, run, "gpt", "Test GPU");
    detector_ = std::make_unique<ThroughputRegressionDetector>(
        std::make_shared<WindowViews>(), Config(),
        std::make_shared<history::HistoryCache>(source, Config()));
  }
  // 10 steps of `step_ns` (step markers) on ranks 0 and 1.
  std::vector<Diagnosis> Window(uint64_t step_ns) {
    for (int r = 0; r < 2; ++r) {
      job_.Rank(r, r == 0 ? "node-a" : "node-b", "Test GPU");
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      for (int s = 0; s <= 10; ++s) job_.Add(r, Host(kStep, t_ + s * step_ns, kUs, step_ + s));
    }
    t_ += kSec;
    step_ += 11;
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }

  TestJob job_;
  uint64_t t_ = kSec;
  int step_ = 0;
  std::unique_ptr<ThroughputRegressionDetector> detector_ =
      std::make_unique<ThroughputRegressionDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(ThroughputRegressionTest, SteadyStepsAreSilent) {
  for (int w = 0; w < 8; ++w) EXPECT_TRUE(Window(10 * kMs).empty());
}

TEST_F(ThroughputRegressionTest, SlowerThanTheJobsOwnBestOnceItPersists) {
  Healthy();
  EXPECT_TRUE(Window(11 * kMs).empty());  // throughput.persist_windows = 2
  std::vector<Diagnosis> out = Window(11 * kMs);
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "throughput_regression");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_EQ(d.subject, "job");
  EXPECT_EQ(d.severity, Severity::kWarning);  // +10 %: not beyond 4 x the threshold
  EXPECT_THAT(d.ranks, ElementsAre(0, 1));
  EXPECT_THAT(d.hosts, ElementsAre("node-a", "node-b"));
  EXPECT_THAT(d.evidence, HasSubstr("mean step time of the last 10 steps 11.00 ms vs recent best "
                                    "10-step mean 10.00 ms (10th percentile): +10.0 %, noise of "
                                    "a 10-step mean "));
  EXPECT_THAT(d.evidence, HasSubstr(" (threshold 5.0 %); steps from "));
  EXPECT_THAT(d.evidence, HasSubstr(" on rank 0, 60 steps of history"));
}

TEST_F(ThroughputRegressionTest, LargeRegressionIsCritical) {
  Healthy();
  Window(25 * kMs);
  std::vector<Diagnosis> out = Window(25 * kMs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kCritical);
  EXPECT_THAT(out[0].evidence, HasSubstr(": +150.0 %"));
}

TEST_F(ThroughputRegressionTest, OneSlowWindowIsNotARegression) {
  Healthy();
  EXPECT_TRUE(Window(12 * kMs).empty());
  EXPECT_TRUE(Window(10 * kMs).empty());
}

TEST_F(ThroughputRegressionTest, SlowerThanPreviousRunsFromTheFirstWindow) {
  UseHistory(0.010);
  std::vector<Diagnosis> out = Window(12 * kMs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_THAT(out[0].evidence,
              HasSubstr("step 12.0 ms (median of the last 10 steps) vs 10.0 ms median of 2 "
                        "previous runs of job 'gpt' on Test GPU: +20.0 %"));
  EXPECT_THAT(out[0].evidence, Not(HasSubstr("recent best")));
}

TEST_F(ThroughputRegressionTest, AsFastAsPreviousRunsIsSilent) {
  UseHistory(0.010);
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(10 * kMs + 100 * kUs).empty());
}

TEST_F(ThroughputRegressionTest, NoStepsNoVerdict) {
  job_.Define(0, KernelSig(2));
  job_.Add(0, Timed(2, kSec, kMs));
  job_.CloseWindow();
  EXPECT_TRUE(Diagnose(*detector_, job_).empty());
}

}  // namespace
}  // namespace xpu::engine
