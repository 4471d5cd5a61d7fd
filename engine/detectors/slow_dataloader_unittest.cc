#include "engine/detectors/slow_dataloader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1, kKernel = 2, kLoader = 3;
constexpr uint64_t kStepNs = 10 * kMs;

class SlowDataloaderTest : public ::testing::Test {
 protected:
  // Five 10 ms steps on each of `n` ranks; each step starts with a DataLoader
  // call of `loader_ns` (rank -> time, default 0.5 ms), then the GPU works
  // until the step ends.
  std::vector<Diagnosis> Window(int n, const std::map<int, uint64_t>& loader_ns) {
    for (int r = 0; r < n; ++r) {
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      job_.Define(r, KernelSig(kKernel));
      job_.Define(r, HostSig(kLoader, XPU_OP_PY_DATALOADER));
      const uint64_t loader = loader_ns.count(r) ? loader_ns.at(r) : 500 * kUs;
      for (int s = 0; s <= 5; ++s) {
        const uint64_t t = t_ + s * kStepNs;
        job_.Add(r, Host(kStep, t, kUs, step_ + s));
        if (s == 5) break;
        job_.Add(r, Host(kLoader, t, loader));
        job_.Add(r, Timed(kKernel, t + loader + 100 * kUs, kStepNs - loader - 200 * kUs, s));
      }
    }
    t_ += kSec;
    step_ += 6;
    job_.CloseWindow();
    return Diagnose(detector_, job_);
  }

  TestJob job_;
  uint64_t t_ = kSec;
  int step_ = 0;
  SlowDataloaderDetector detector_{std::make_shared<WindowViews>(), Config()};
};

TEST_F(SlowDataloaderTest, HealthyLoadersAreSilent) { EXPECT_TRUE(Window(8, {}).empty()); }

TEST_F(SlowDataloaderTest, OneRankBeyondItsPeers) {
  // 1.5 ms of 10 ms: under dataloader.abs_share, but far beyond the others.
  std::vector<Diagnosis> out = Window(8, {{3, 1500 * kUs}});
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "slow_dataloader");
  EXPECT_EQ(d.team, Team::kAlgorithm);
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.subject, "ranks:3");
  EXPECT_THAT(d.ranks, ElementsAre(3));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_EQ(d.evidence,
            "DataLoader time share of the step: rank 3 15.0 % (1.5 ms per step); median over 8 "
            "ranks 5.0 % (rule: >= 10 % and beyond median + 5 MAD, or >= 25 %)");
}

TEST_F(SlowDataloaderTest, EveryRankOverTheAbsoluteShare) {
  std::map<int, uint64_t> slow;
  for (int r = 0; r < 8; ++r) slow[r] = 3 * kMs;
  std::vector<Diagnosis> out = Window(8, slow);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "all");
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(out[0].hosts, ElementsAre("node0", "node1"));
  EXPECT_THAT(out[0].evidence, HasSubstr("rank 0 30.0 % (3.0 ms per step), rank 1 30.0 %"));
}

TEST_F(SlowDataloaderTest, SharedModerateShareOrSmallOutlierIsSilent) {
  // Every rank at 15 %: nobody stands out and nobody reaches 25 %.
  std::map<int, uint64_t> moderate;
  for (int r = 0; r < 8; ++r) moderate[r] = 1500 * kUs;
  EXPECT_TRUE(Window(8, moderate).empty());
  // An outlier under dataloader.min_share (8 %).
  EXPECT_TRUE(Window(8, {{5, 800 * kUs}}).empty());
}

TEST_F(SlowDataloaderTest, RanksWithoutDataLoaderEventsAreNotJudged) {
  // No DataLoader records at all: nothing to measure.
  for (int r = 0; r < 4; ++r) {
    job_.Define(r, HostSig(kStep, XPU_OP_STEP));
    for (int s = 0; s <= 5; ++s) job_.Add(r, Host(kStep, t_ + s * kStepNs, kUs, s));
  }
  job_.CloseWindow();
  EXPECT_TRUE(Diagnose(detector_, job_).empty());
}

}  // namespace
}  // namespace xpu::engine
