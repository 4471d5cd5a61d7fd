#include "engine/detectors/void_minority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1, kKernel = 2;
constexpr uint64_t kStepNs = 10 * kMs;

class VoidMinorityTest : public ::testing::Test {
 protected:
  // Five 10 ms steps on each of `n` ranks: ten 1 ms slots per step, each a
  // traced kernel followed by a `gap_ns` gap. On `busy` ranks the next
  // kernel was launched long before (2 ms issue latency): the GPU was busy
  // with untraced kernels in the gap. Elsewhere it was launched 10 us
  // before it started: the host was late, which is not minority time.
  // `gap_of` overrides gap_ns per rank.
  std::vector<Diagnosis> Window(int n, const std::set<int>& busy, uint64_t gap_ns = 200 * kUs,
                                const std::map<int, uint64_t>& gap_of = {}) {
    for (int r = 0; r < n; ++r) {
      const uint64_t gap = gap_of.count(r) ? gap_of.at(r) : gap_ns;
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      job_.Define(r, KernelSig(kKernel));
      const int64_t issue = busy.count(r) ? 2 * kMs : 10 * kUs;
      // One slot before the first boundary, so that every step's first
      // kernel has a predecessor.
      for (int i = -1; i < 50; ++i) {
        if (i % 10 == 0) job_.Add(r, Host(kStep, t_ + i * kMs, kUs, step_ + i / 10));
        job_.Add(r, Timed(kKernel, t_ + i * kMs, kMs - gap, i + 1, issue));
      }
      job_.Add(r, Host(kStep, t_ + 50 * kMs, kUs, step_ + 5));
    }
    t_ += kSec;
    step_ += 6;
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }

  TestJob job_;
  uint64_t t_ = kSec;
  int step_ = 0;
  std::unique_ptr<VoidMinorityDetector> detector_ =
      std::make_unique<VoidMinorityDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(VoidMinorityTest, HostLatenessIsNotMinorityTime) {
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(4, {}).empty());
}

// By default, what a rank did from its first window is its baseline: the
// same untraced kernels from the start are silent, however long they last.
TEST_F(VoidMinorityTest, UntracedKernelsFromTheStartAreTheProgramsShape) {
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(4, {1}).empty()) << "window " << w;
}
TEST_F(VoidMinorityTest, UntracedKernelsOfTheWholeProgramFromTheStartAreItsShape) {
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(2, {0, 1}).empty()) << "window " << w;
}

// With a threshold set for the backbone, the untraced kernels are reported
// from the start.
TEST_F(VoidMinorityTest, UntracedKernelsOnOneRank) {
  detector_ = std::make_unique<VoidMinorityDetector>(std::make_shared<WindowViews>(),
                                                     Config({{"void_minority.threshold", 0.15}}));
  EXPECT_TRUE(Window(4, {1}).empty());  // void_minority.persist_windows = 2
  std::vector<Diagnosis> out = Window(4, {1});
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "void_minority");
  EXPECT_EQ(d.team, Team::kInfrastructure);
  EXPECT_EQ(d.subject, "void_minority");
  EXPECT_THAT(d.ranks, ElementsAre(1));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  // 50 gaps of 0.2 ms; T_inter is the 0.2 ms gap at each of the 5 boundaries.
  EXPECT_EQ(d.evidence,
            "untraced (minority) GPU kernels occupy the step: rank 1 V_minority 20.4 % (T_minority "
            "10.0 ms of 49.0 ms in-step time over 5 steps, peers 0.0 %) (threshold 15.0 % for "
            "backbone gpt, or baseline / history + 10.0 points)");
}

// Every rank runs the same untraced kernels (an unfused activation in the
// model) from the first step: the job's median is over the threshold set.
TEST_F(VoidMinorityTest, UntracedKernelsOfTheWholeProgram) {
  detector_ = std::make_unique<VoidMinorityDetector>(std::make_shared<WindowViews>(),
                                                     Config({{"void_minority.threshold", 0.15}}));
  EXPECT_TRUE(Window(2, {0, 1}).empty());
  std::vector<Diagnosis> out = Window(2, {0, 1});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1));
}

// Healthy FSDP on two GPUs: both ranks run the same copy kernels for the
// parameter all-gather and gradient reduce-scatter; one rank's estimate
// came out at 20 %, the other's at 14 %. Neither stands out from the other
// and the job's lower median is under the threshold: silent; the 20 % is
// that rank's baseline, so a later growth by 10 points is still caught.
TEST_F(VoidMinorityTest, OneRankOverTheThresholdWithClosePeersIsTheProgramsShare) {
  const std::map<int, uint64_t> fsdp = {{0, 140 * kUs}};
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(2, {0, 1}, 200 * kUs, fsdp).empty()) << w;
  const std::map<int, uint64_t> grown = {{0, 140 * kUs}, {1, 320 * kUs}};
  EXPECT_TRUE(Window(2, {0, 1}, 200 * kUs, grown).empty());
  std::vector<Diagnosis> out = Window(2, {0, 1}, 200 * kUs, grown);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence, HasSubstr("rank 1 V_minority 33.1 % (T_minority 16.0 ms of 48.4 ms "
                                         "in-step time over 5 steps, peers 14.2 %, baseline 20.4 %)"));
}

// Healthy FSDP on 2 H200s, later in the run: rank 1 at 17.8 % (21.6 % in
// its first windows) while rank 0 fell to 4.7 %. Rank 1 now stands out from
// its peer, but not from itself: silent. A rise above its own baseline is
// still caught.
TEST_F(VoidMinorityTest, APeerThatFellDoesNotMakeARankStandOut) {
  const std::map<int, uint64_t> start = {{0, 140 * kUs}};  // 14 % and 20 %
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(2, {0, 1}, 200 * kUs, start).empty()) << w;
  const std::map<int, uint64_t> later = {{0, 40 * kUs}, {1, 180 * kUs}};  // 4 % and 18 %
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(2, {0, 1}, 200 * kUs, later).empty()) << w;
  const std::map<int, uint64_t> risen = {{0, 40 * kUs}, {1, 320 * kUs}};  // 33 %
  EXPECT_TRUE(Window(2, {0, 1}, 200 * kUs, risen).empty());
  std::vector<Diagnosis> out = Window(2, {0, 1}, 200 * kUs, risen);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
}

TEST_F(VoidMinorityTest, EveryRankAboveItsBaseline) {
  Window(4, {0, 1, 2, 3}, 50 * kUs);  // 5 %: the baseline of every rank
  Window(4, {0, 1, 2, 3}, 50 * kUs);
  // 12 %: under the threshold, 7 points above the baseline; not 10.
  EXPECT_TRUE(Window(4, {0, 1, 2, 3}, 120 * kUs).empty());
  EXPECT_TRUE(Window(4, {0, 1, 2, 3}, 120 * kUs).empty());
  // 20 %: over the threshold anyway.
  EXPECT_TRUE(Window(4, {0, 1, 2, 3}).empty());
  std::vector<Diagnosis> out = Window(4, {0, 1, 2, 3});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out[0].evidence, HasSubstr(" steps, peers 20.4 %, baseline 5.0 %)"));
}

TEST_F(VoidMinorityTest, PreviousRunsOfTheJobName) {
  auto source = std::make_shared<FixedHistory>();
  history::RunBaseline run;
  run.void_minority = 0.01;
  source->AddRuns(3, run, "gpt", "Test GPU");
  detector_ = std::make_unique<VoidMinorityDetector>(
      std::make_shared<WindowViews>(), Config(),
      std::make_shared<history::HistoryCache>(source, Config()));
  for (int r = 0; r < 4; ++r) job_.Rank(r, "", "Test GPU");
  // 12 % from the start: under the threshold, 11 points above earlier runs.
  EXPECT_TRUE(Window(4, {2}, 120 * kUs).empty());
  std::vector<Diagnosis> out = Window(4, {2}, 120 * kUs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(2));
  EXPECT_THAT(out[0].evidence,
              HasSubstr(" steps, peers 0.0 %, 1.0 % in 3 previous runs of job 'gpt' on Test GPU)"));
}

}  // namespace
}  // namespace xpu::engine
