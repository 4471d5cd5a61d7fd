#include "common/analysis/steps.h"

#include <gtest/gtest.h>

#include "common/analysis/test_util.h"

namespace xpu::analysis {
namespace {

using testing::Coll;
using testing::MakeOp;
using testing::Simple;

TEST(StepsTest, MarkersGiveBoundaries) {
  RankTrace t;
  t.sigs[1] = Simple(XPU_OP_STEP);
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 1000, 0, 1, XPU_REC_HOST));
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 3000, 0, 2, XPU_REC_HOST));
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 3000, 0, 2, XPU_REC_HOST | XPU_REC_END));  // same step
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 6000, 0, 3, XPU_REC_HOST));
  Steps s = FindSteps(t);
  EXPECT_EQ(s.source, StepSource::kMarkers);
  EXPECT_EQ(s.boundaries_ns, (std::vector<uint64_t>{1000, 3000, 6000}));
  auto d = s.DurationsS();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0], 2e-6, 1e-15);
  EXPECT_NEAR(d[1], 3e-6, 1e-15);
}

TEST(StepsTest, PeriodOfCollectiveSequence) {
  // A B A B C | A B A B C | ...: period 5.
  std::vector<uint64_t> sym;
  for (int i = 0; i < 4; ++i) sym.insert(sym.end(), {0, 1, 0, 1, 2});
  EXPECT_EQ(SequencePeriod(sym), 5u);
  EXPECT_EQ(SequencePeriod({0, 1, 2, 3, 4, 5}), 0u);  // no repetition
}

TEST(StepsTest, StepsFromCollectivePeriodWithoutMarkers) {
  RankTrace t;
  t.sigs[1] = Coll(XPU_OP_ALLREDUCE, 1000, 5, 0, 8);  // per layer, twice per step
  t.sigs[2] = Coll(XPU_OP_ALLGATHER, 4000, 5, 0, 8);  // once per step
  uint64_t step_start[] = {10000, 110000, 230000, 330000, 460000};
  uint32_t seq = 1;
  for (uint64_t s : step_start) {
    t.ops.push_back(MakeOp(1, XPU_OP_ALLREDUCE, s, 10, seq++));
    t.ops.push_back(MakeOp(1, XPU_OP_ALLREDUCE, s + 30000, 10, seq++));
    t.ops.push_back(MakeOp(2, XPU_OP_ALLGATHER, s + 60000, 10, seq++));
  }
  Steps s = FindSteps(t);
  ASSERT_EQ(s.source, StepSource::kCollectivePeriod);
  EXPECT_EQ(s.period, 3u);
  // Phased on the allgather: boundaries at s + 60 us.
  EXPECT_EQ(s.boundaries_ns, (std::vector<uint64_t>{70000, 170000, 290000, 390000, 520000}));
  auto d = s.DurationsS();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_NEAR(d[1], 120e-6, 1e-12);
}

// A gradient all-reduce that starts after collectives issued later on the
// same communicator (its stream waited for the backward kernel) every few
// steps: in start order the 6-collective step no longer repeats; in issue
// order (launch = start - issue latency) it does.
TEST(StepsTest, PeriodFollowsIssueOrderNotStartOrder) {
  RankTrace t;
  t.sigs[1] = Coll(XPU_OP_ALLREDUCE, 917504, 5, 0, 2);
  t.sigs[2] = Coll(XPU_OP_ALLGATHER, 262144, 5, 0, 2);
  t.sigs[3] = Coll(XPU_OP_REDUCESCATTER, 262144, 5, 0, 2);
  t.sigs[4] = Coll(XPU_OP_SEND, 131072, 5, 0, 2);
  t.sigs[5] = Coll(XPU_OP_RECV, 131072, 5, 0, 2);
  uint32_t seq = 1, p2p = 1;
  const uint64_t step_ns = 35000000;
  for (int step = 0; step < 60; ++step) {
    const uint64_t s = 1000000 + step * step_ns;
    // Every 4th step the second all-reduce starts 20 ms late, after the
    // allgather, reduce-scatter, send and receive issued after it.
    const int32_t late = step % 4 == 1 ? 20000000 : 0;
    auto add = [&](uint32_t sig, uint16_t kind, uint64_t launch, int32_t lat, uint32_t n) {
      t.ops.push_back(MakeOp(sig, kind, launch + lat, 10, n, 0, 2, lat));
    };
    add(1, XPU_OP_ALLREDUCE, s, 1000, seq++);
    add(1, XPU_OP_ALLREDUCE, s + 10000, 1000 + late, seq++);
    add(2, XPU_OP_ALLGATHER, s + 12000, 1000, seq++);
    add(3, XPU_OP_REDUCESCATTER, s + 14000, 1000, seq++);
    add(4, XPU_OP_SEND, s + 16000, 1000, p2p);
    add(5, XPU_OP_RECV, s + 16040, 1000, p2p++);
  }
  t.Sort();
  Steps st = FindSteps(t);
  ASSERT_EQ(st.source, StepSource::kCollectivePeriod);
  EXPECT_EQ(st.period, 6u);
  ASSERT_EQ(st.boundaries_ns.size(), 60u);
  for (double d : st.DurationsS()) EXPECT_NEAR(d, 0.035, 1e-6);
}

TEST(StepsTest, ThroughputChangeAgainstRecentBest) {
  // N = 3. Steps 1.0 x6 then 1.1 x3: recent mean 1.1, best 1.0 -> +10 %.
  std::vector<double> s = {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.1, 1.1};
  ThroughputChange c = DetectThroughputChange(s, 3);
  ASSERT_TRUE(c.enough_data);
  EXPECT_TRUE(c.degraded);
  EXPECT_NEAR(c.change, 0.1, 1e-9);
  EXPECT_NEAR(c.best_mean_s, 1.0, 1e-12);
  // +4 % is under the 5 % threshold.
  std::vector<double> small = {1.0, 1.0, 1.0, 1.04, 1.04, 1.04};
  EXPECT_FALSE(DetectThroughputChange(small, 3).degraded);
  EXPECT_FALSE(DetectThroughputChange({1.0, 2.0}, 3).enough_data);
}

// Noisy steps (a launch-bound job, CPU threads posing as GPUs): the smallest
// of many N-step means is an outlier that later means exceed by more than 5 %
// with nothing wrong; the percentile best and the noise floor keep quiet,
// and a real change of level still counts.
TEST(StepsTest, ThroughputChangeIsRobustToNoisySteps) {
  std::vector<double> s;
  uint64_t x = 12345;
  auto noise = [&]() {  // deterministic, roughly uniform in [-0.2, 0.2)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (static_cast<double>(x >> 11) / static_cast<double>(1ull << 53) - 0.5) * 0.4;
  };
  for (int i = 0; i < 4000; ++i) s.push_back(5e-3 * (1 + noise()));
  ThroughputChange quiet = DetectThroughputChange(s, 10);
  EXPECT_FALSE(quiet.degraded) << quiet.change << " noise " << quiet.noise_s;
  EXPECT_GT(quiet.noise_s, 0);
  // The old rule (the minimum N-step mean) sees a large "regression".
  double lo = 1;
  for (size_t i = 10; i <= s.size(); ++i) {
    double m = 0;
    for (size_t j = i - 10; j < i; ++j) m += s[j];
    lo = std::min(lo, m / 10);
  }
  EXPECT_GT(quiet.recent_mean_s / lo - 1, 0.05);
  // 40 % slower for the last 20 steps: degraded.
  for (int i = 0; i < 20; ++i) s.push_back(7e-3 * (1 + noise()));
  EXPECT_TRUE(DetectThroughputChange(s, 10).degraded);
}

TEST(StepsTest, ThroughputChangeJudgesAWanderingJobAgainstItsWandering) {
  // A launch-bound loop on a shared host: its level moves between 48 and
  // 58 ms every 50 steps, with quiet steps in between (what 2 H200s showed
  // without any tracing: 50-step medians from 40 to 61 ms).
  std::vector<double> s;
  for (int i = 0; i < 1000; ++i) s.push_back((i / 50 % 2 ? 58e-3 : 48e-3) + (i % 3) * 1e-4);
  ThroughputChange wander = DetectThroughputChange(s, 10);
  EXPECT_GT(wander.change, 0.15);  // the last steps are at the high level
  EXPECT_FALSE(wander.degraded) << wander.change << " noise " << wander.noise_s;
  EXPECT_GT(wander.noise_s, 3e-3);
  // The same job 40 % slower than its slow level: degraded.
  for (int i = 0; i < 20; ++i) s.push_back(80e-3 + (i % 3) * 1e-4);
  EXPECT_TRUE(DetectThroughputChange(s, 10).degraded);
  // A steady job's spread of means stays its standard error.
  std::vector<double> steady(1000, 50e-3);
  for (size_t i = 0; i < steady.size(); ++i) steady[i] += (i % 3) * 1e-4;
  EXPECT_LT(DetectThroughputChange(steady, 10).noise_s, 1e-4);
}

}  // namespace
}  // namespace xpu::analysis
