#include "engine/detectors/void_inter.h"

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

// How one rank spends the start of each 10 ms step: the GPU idles `idle_ns`
// after the boundary; a DataLoader call of `loader_ns` (0: none) fills
// part of that gap.
struct Gap {
  uint64_t idle_ns = 500 * kUs;
  uint64_t loader_ns = 0;
  uint64_t pause_ns = 0;  // the job pauses this long before the fourth step
};

class VoidInterTest : public ::testing::Test {
 protected:
  void UseHistory(double previous_void_inter) {
    auto source = std::make_shared<FixedHistory>();
    history::RunBaseline run;
    run.void_inter = previous_void_inter;
    source->AddRuns(2, run, "gpt", "Test GPU");
    detector_ = std::make_unique<VoidInterDetector>(
        std::make_shared<WindowViews>(), Config(),
        std::make_shared<history::HistoryCache>(source, Config()));
  }
  // Five steps on each of `n` ranks; the GPU runs one kernel per step from
  // the end of the inter-step gap to the next boundary (and one before the
  // first boundary, so that every step has a gap).
  std::vector<Diagnosis> Window(int n, const std::map<int, Gap>& gaps = {}) {
    for (int r = 0; r < n; ++r) {
      const Gap g = gaps.count(r) ? gaps.at(r) : Gap{};
      job_.Rank(r, "", "Test GPU");
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      job_.Define(r, KernelSig(kKernel));
      job_.Define(r, HostSig(kLoader, XPU_OP_PY_DATALOADER));
      job_.Add(r, Timed(kKernel, t_ - 5 * kMs, 5 * kMs));
      for (int s = 0; s <= 5; ++s) {
        const uint64_t t = t_ + s * kStepNs + (s >= 3 ? g.pause_ns : 0);
        job_.Add(r, Host(kStep, t, kUs, step_ + s));
        if (s == 5) break;
        if (g.loader_ns) job_.Add(r, Host(kLoader, t + 100 * kUs, g.loader_ns));
        job_.Add(r, Timed(kKernel, t + g.idle_ns, kStepNs - g.idle_ns, s + 1));
      }
    }
    t_ += kSec + 60 * kSec;  // room for pauses
    step_ += 6;
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }

  TestJob job_;
  uint64_t t_ = kSec;
  int step_ = 0;
  std::unique_ptr<VoidInterDetector> detector_ =
      std::make_unique<VoidInterDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(VoidInterTest, HealthyStepsAreSilent) {
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(4).empty());
}

TEST_F(VoidInterTest, RankAboveTheThresholdOnceItPersists) {
  const std::map<int, Gap> idle = {{2, Gap{3 * kMs}}};  // V_inter 30 %
  EXPECT_TRUE(Window(4, idle).empty());                 // void_inter.persist_windows = 2
  std::vector<Diagnosis> out = Window(4, idle);
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "void_inter");
  EXPECT_EQ(d.team, Team::kAlgorithm);
  EXPECT_EQ(d.subject, "void_inter");
  EXPECT_THAT(d.ranks, ElementsAre(2));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_EQ(d.evidence,
            "inter-step CPU time leaves the GPU idle: rank 2 V_inter 30.0 % (T_inter 15.0 ms of "
            "50.0 ms over 5 steps) (threshold 25.0 % for backbone gpt, or baseline / history + "
            "5.0 points)");
  EXPECT_TRUE(Window(4).empty());  // back to normal
}

TEST_F(VoidInterTest, RankAboveItsOwnBaseline) {
  Window(4);
  Window(4);  // history.baseline_windows = 2 windows at 5 %
  const std::map<int, Gap> idle = {{1, Gap{1200 * kUs}}};  // 12 %: under 25 %, 7 points up
  EXPECT_TRUE(Window(4, idle).empty());
  std::vector<Diagnosis> out = Window(4, idle);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence, HasSubstr("rank 1 V_inter 12.0 % (T_inter 6.0 ms of 50.0 ms over "
                                         "5 steps, baseline 5.0 %)"));
}

TEST_F(VoidInterTest, PerBackboneThreshold) {
  detector_ = std::make_unique<VoidInterDetector>(
      std::make_shared<WindowViews>(),
      Config({{"void_inter.threshold@gpt", 0.1}, {"void_inter.threshold@other", 0.01}}));
  const std::map<int, Gap> idle = {{3, Gap{1200 * kUs}}};
  Window(4, idle);
  std::vector<Diagnosis> out = Window(4, idle);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(3));
  EXPECT_THAT(out[0].evidence, HasSubstr("(threshold 10.0 % for backbone gpt"));
}

TEST_F(VoidInterTest, PreviousRunsOfTheJobName) {
  UseHistory(0.05);
  // 12 % from the first window: no clean baseline of its own, but previous
  // runs sat at 5 %.
  const std::map<int, Gap> idle = {{0, Gap{1200 * kUs}}};
  EXPECT_TRUE(Window(4, idle).empty());
  std::vector<Diagnosis> out = Window(4, idle);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("5 steps, 5.0 % in 2 previous runs of job 'gpt' on Test GPU)"));
}

TEST_F(VoidInterTest, DataLoaderGapIsLeftToSlowDataloader) {
  // A 2.8 ms DataLoader call inside the 3 ms gap explains it.
  const std::map<int, Gap> loader = {{2, Gap{3 * kMs, 2800 * kUs}}};
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(4, loader).empty());
  // A short call does not: the gap is someone else's.
  const std::map<int, Gap> other = {{2, Gap{3 * kMs, 500 * kUs}}};
  Window(4, other);
  std::vector<Diagnosis> out = Window(4, other);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(2));
}

// A window that holds the end of one burst of steps and the start of the
// next (a checkpoint, an evaluation, or a window that closed late while the
// records of two bursts arrived): the GPU idles 20 s between them. That is
// a pause, not inter-step CPU time of the training steps: silent.
TEST_F(VoidInterTest, APauseBetweenStepsIsNotInterStepTime) {
  const std::map<int, Gap> paused = {{1, Gap{500 * kUs, 0, 20 * kSec}}};
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(4, paused).empty()) << "window " << w;
  // The steps around it still count: 30 % idle after each boundary is.
  const std::map<int, Gap> both = {{1, Gap{3 * kMs, 0, 20 * kSec}}};
  Window(4, both);
  std::vector<Diagnosis> out = Window(4, both);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].evidence, HasSubstr("rank 1 V_inter 30.0 % (T_inter 12.0 ms of 40.0 ms over "
                                         "4 steps"));
}

}  // namespace
}  // namespace xpu::engine
