#include "engine/detectors/kernel_issue_stall.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1, kKernel = 2, kAllReduce = 3, kGc = 4, kSync = 5, kLoader = 6;
constexpr uint64_t kStepNs = 10 * kMs;
constexpr int kStepsPerWindow = 5;

// What one rank does in each 10 ms step.
struct Load {
  double issue_us = 2000;  // median issue latency of its kernels and collectives
  double comm_issue_us = -1;  // of its collectives alone when >= 0
  int gc = 0;              // GC pauses of 300 us
  int syncs = 0;           // stream synchronizations of 50 us
  uint64_t loader_ns = 0;  // DataLoader call at the start of the step
  uint64_t allreduce_ns = 500 * kUs;
  int kernels = 10, allreduces = 5;  // per step
  uint64_t kernel_period_ns = 400 * kUs;  // kernels of 300 us start this far apart
  bool refilled_after_sync = false;       // kernels 3 to 5 start 5 us after their launch
};
// A rank whose host work starves its GPU: the queue runs dry, kernels start
// 5 us after their launch.
Load Stalled(int gc = 0, int syncs = 0) {
  Load l;
  l.issue_us = 5;
  l.gc = gc;
  l.syncs = syncs;
  return l;
}
Load Syncing(int syncs) {
  Load l;
  l.syncs = syncs;
  return l;
}

class KernelIssueStallTest : public ::testing::Test {
 protected:
  // Five steps on every rank of `loads` (rank -> load), then the window
  // closes; returns what the detector reports.
  std::vector<Diagnosis> Window(const std::map<int, Load>& loads) {
    for (const auto& [rank, load] : loads) Steps(rank, load);
    first_step_ += kStepsPerWindow + 1;
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }
  void Steps(int rank, const Load& l) {
    job_.Rank(rank, "", "Test GPU");
    job_.Define(rank, HostSig(kStep, XPU_OP_STEP));
    job_.Define(rank, KernelSig(kKernel));
    job_.Define(rank, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 9, rank, 8));
    job_.Define(rank, HostSig(kGc, XPU_OP_PY_GC));
    job_.Define(rank, HostSig(kSync, XPU_OP_SYNC_STREAM));
    job_.Define(rank, HostSig(kLoader, XPU_OP_PY_DATALOADER));
    const uint64_t base = kSec + static_cast<uint64_t>(first_step_) * kStepNs;
    for (int s = 0; s <= kStepsPerWindow; ++s) {
      const uint64_t t = base + s * kStepNs;
      job_.Add(rank, Host(kStep, t, kUs, first_step_ + s));
      if (s == kStepsPerWindow) break;  // the marker that ends the last step
      if (l.loader_ns) job_.Add(rank, Host(kLoader, t + 10 * kUs, l.loader_ns));
      // Ten kernels, issue latencies 0.55x .. 1.45x the median.
      for (int i = 0; i < l.kernels; ++i) {
        const double issue =
            (l.refilled_after_sync && i >= 3 && i <= 5 ? 5 : l.issue_us) * (0.55 + 0.1 * i) * 1e3;
        job_.Add(rank, Timed(kKernel, t + kMs + i * l.kernel_period_ns, 300 * kUs, i,
                             std::llround(issue)));
      }
      // Five all-reduces, issue latencies 0.8x .. 1.2x the median.
      for (int i = 0; i < l.allreduces; ++i) {
        const double issue = (l.comm_issue_us >= 0 ? l.comm_issue_us : l.issue_us) * (0.8 + 0.1 * i) * 1e3;
        job_.Add(rank, Timed(kAllReduce, t + 5 * kMs + i * kMs, l.allreduce_ns, s * 5 + i,
                             std::llround(issue), 2));
      }
      for (int i = 0; i < l.gc; ++i) job_.Add(rank, Host(kGc, t + 1500 * kUs + i * kMs, 300 * kUs));
      for (int i = 0; i < l.syncs; ++i) {
        job_.Add(rank, Host(kSync, t + 2 * kMs + i * 100 * kUs, 50 * kUs));
      }
    }
  }
  static std::map<int, Load> Ranks(int n, std::map<int, Load> special = {}) {
    std::map<int, Load> out;
    for (int r = 0; r < n; ++r) out[r] = special.count(r) ? special[r] : Load{};
    return out;
  }

  TestJob job_;
  int first_step_ = 0;
  std::shared_ptr<history::HistoryCache> history_;
  std::unique_ptr<KernelIssueStallDetector> detector_ =
      std::make_unique<KernelIssueStallDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(KernelIssueStallTest, HealthyRanksAreSilent) {
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(Window(Ranks(4)).empty()) << "window " << w;
}

TEST_F(KernelIssueStallTest, GcStallOnOneRankIsReportedOnceItPersists) {
  const auto loads = Ranks(4, {{1, Stalled(2)}});
  EXPECT_TRUE(Window(loads).empty());  // issue_stall.persist_windows = 2
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "kernel_issue_stall");
  EXPECT_EQ(d.team, Team::kAlgorithm);
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.subject, "gc");
  EXPECT_THAT(d.ranks, ElementsAre(1));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_THAT(d.evidence, HasSubstr("kernel-issue stall (garbage collection) on 1 rank(s): rank 1: "
                                    "communication kernels: median issue latency 5.0 us vs peers "
                                    "2000.0 us, KS 1.00"));
  EXPECT_THAT(
      d.evidence,
      HasSubstr("compute kernels: median issue latency 5.0 us vs peers 2000.0 us, KS 1.00"));
  // 2 pauses of 300 us in each of 5 steps of 10 ms.
  EXPECT_THAT(d.evidence, HasSubstr("Python GC: 10 collections, 3.0 ms (6.0 % of step time)"));
  // Still stalled: reported again; healthy again: silent.
  EXPECT_EQ(Window(loads).size(), 1u);
  EXPECT_TRUE(Window(Ranks(4)).empty());
}

TEST_F(KernelIssueStallTest, ExcessSynchronizationIsTheCause) {
  const auto loads = Ranks(4, {{2, Stalled(0, 8)}});
  Window(loads);
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].ranks, ElementsAre(2));
  EXPECT_THAT(out[0].evidence, HasSubstr("(unnecessary synchronization)"));
  // After the returns the GPU idles until the next launch: 3 gaps of ~95 us
  // per 10 ms step.
  EXPECT_THAT(out[0].evidence,
              HasSubstr("synchronization: 40 sync calls, 8.0 per step (the other ranks make 0.0 at "
                        "0.00 % of the step); the GPU idled 1.4 ms after they returned = 2.86 % "
                        "of the step time (costly from 2.0 %); 2.0 ms blocked"));
}

TEST_F(KernelIssueStallTest, UnattributedStallIsAHostStall) {
  // Two healthy windows form rank 3's baseline; then its host stalls with
  // no GC or synchronization to show for it.
  Window(Ranks(4));
  Window(Ranks(4));
  const auto loads = Ranks(4, {{3, Stalled()}});
  EXPECT_TRUE(Window(loads).empty());
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "host");
  EXPECT_THAT(out[0].ranks, ElementsAre(3));
  EXPECT_THAT(out[0].hosts, ElementsAre("node0"));
  EXPECT_THAT(out[0].evidence, HasSubstr("(host stall)"));
  EXPECT_THAT(out[0].evidence, HasSubstr("unattributed host-side stall"));
}

// Only the communication kernels of a rank issue with no queue ahead, from
// its third window on, while its compute kernels stay queued as before (on
// 2 H200s, healthy FSDP's rank 0: collectives at 5 us vs 34 us in its first
// windows and 28 us on its peer): how its collectives are scheduled, not a
// host stall. The same with its compute kernels starved too is one.
TEST_F(KernelIssueStallTest, CommunicationAloneIsNoHostStall) {
  Window(Ranks(2));
  Window(Ranks(2));
  Load comm_only;
  comm_only.comm_issue_us = 5;
  for (int w = 0; w < 4; ++w) {
    EXPECT_TRUE(Window(Ranks(2, {{0, comm_only}})).empty()) << "window " << w;
  }
  Window(Ranks(2, {{0, Stalled()}}));
  std::vector<Diagnosis> out = Window(Ranks(2, {{0, Stalled()}}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "host");
}

// A rank that differs from its peers from its first window on, with no GC
// or synchronization to explain it (FSDP's rank 0, whose host issues its
// kernels later than its peer's), does so by its role: no stall, however
// long it lasts. The same rank changing later is one.
TEST_F(KernelIssueStallTest, UnexplainedDifferenceFromTheStartIsNoStall) {
  const auto loads = Ranks(2, {{0, Stalled()}});
  for (int w = 0; w < 6; ++w) EXPECT_TRUE(Window(loads).empty()) << "window " << w;
  // GC on the other rank from now on: a cause, reported.
  const auto gc = Ranks(2, {{0, Stalled()}, {1, Stalled(2)}});
  Window(gc);
  std::vector<Diagnosis> out = Window(gc);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "gc");
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
}

TEST_F(KernelIssueStallTest, RanksWithDifferentCausesGetOneDiagnosisPerCause) {
  const auto loads = Ranks(8, {{1, Stalled(2)}, {5, Stalled(2)}, {6, Stalled(0, 8)}});
  Window(loads);
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 2u);
  // Causes in name order: gc, sync.
  EXPECT_EQ(out[0].subject, "gc");
  EXPECT_THAT(out[0].ranks, ElementsAre(1, 5));
  EXPECT_THAT(out[0].hosts, ElementsAre("node0", "node1"));
  EXPECT_THAT(out[0].evidence, HasSubstr("on 2 rank(s): rank 1: "));
  EXPECT_THAT(out[0].evidence, HasSubstr(" | rank 5: "));
  EXPECT_EQ(out[1].subject, "sync");
  EXPECT_THAT(out[1].ranks, ElementsAre(6));
}

TEST_F(KernelIssueStallTest, SlowDataloaderIsLeftToItsOwnDetector) {
  // 2 ms of DataLoader per 10 ms step: 20 % >= dataloader.min_share.
  Load loader = Stalled(2);
  loader.loader_ns = 2 * kMs;
  const auto loads = Ranks(4, {{1, loader}});
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(loads).empty());
}

TEST_F(KernelIssueStallTest, RankWaitingForASlowerPeerIsNotJudged) {
  // Rank 1's collectives take 1.5 ms instead of 0.5 ms: it waits in them
  // (its queue drains while it waits), its short issue latencies are not its
  // own doing.
  Load waiting = Stalled();
  waiting.allreduce_ns = 1500 * kUs;
  const auto loads = Ranks(4, {{1, waiting}});
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(loads).empty());
}

TEST_F(KernelIssueStallTest, EveryRankAgainstItsOwnFirstWindows) {
  // Two healthy windows form each rank's baseline; then every rank stalls
  // alike (a synchronize added to the model): no peer stands out, the
  // history does.
  Window(Ranks(4));
  Window(Ranks(4));
  const auto stalled = Ranks(4, {{0, Stalled()}, {1, Stalled()}, {2, Stalled()}, {3, Stalled()}});
  EXPECT_TRUE(Window(stalled).empty());
  std::vector<Diagnosis> out = Window(stalled);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "host");
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out[0].evidence, HasSubstr("compute kernels: median issue latency 5.0 us vs this "
                                         "rank's history 2000.0 us, KS 1.00"));
}

TEST_F(KernelIssueStallTest, SteepCdfWithExcessSyncsNeedsNoReference) {
  // One rank, no peers and no baseline: 8 synchronizations per step and
  // issue latencies under issue_stall.floor_us.
  const auto loads = Ranks(1, {{0, Stalled(0, 8)}});
  EXPECT_TRUE(Window(loads).empty());
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].evidence,
              HasSubstr("compute kernels: 100 % of issue latencies under 20 us, median 5.0 us = "));
  EXPECT_THAT(out[0].evidence, HasSubstr(" % of the 10.0 ms step (steep CDF"));
  EXPECT_THAT(out[0].evidence, HasSubstr("= 2.86 % of the step time"));
}

// Healthy launch-bound and FSDP steps on real GPUs: a steep issue-latency
// CDF (the host never gets ahead) and 4 to 6 synchronizations per step, but
// the GPU is busy when they return (its queue holds the next kernel within
// 2 us): they cost the step ~0.1 %. However many there are, they are no
// stall, on one rank or on all.
TEST_F(KernelIssueStallTest, ManyCheapSynchronizationsAreSilent) {
  Load four = Stalled(0, 4), six = Stalled(0, 6);
  four.kernel_period_ns = six.kernel_period_ns = 302 * kUs;
  for (int w = 0; w < 4; ++w) {
    EXPECT_TRUE(Window(Ranks(2, {{0, six}, {1, four}})).empty()) << "window " << w;
  }
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(Ranks(1, {{0, six}})).empty()) << "window " << w;
}

// The same steep CDF with syncs after which the GPU idles (the host does
// its own work before refilling the queue): costly from sync_cost_share.
TEST_F(KernelIssueStallTest, CostlySynchronizationsOnEveryRankAreNamed) {
  const auto loads = Ranks(2, {{0, Stalled(0, 8)}, {1, Stalled(0, 8)}});
  EXPECT_TRUE(Window(loads).empty());
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1));
}

// One rank of two synchronizes inside every block of a GPU-bound forward:
// most of its issue latencies stay long (the backward has no syncs), so no
// comparison of latencies flags it, but it makes 3x its peer's syncs and
// they cost it ~1.9 % of the step, its peer nothing: named on its own.
TEST_F(KernelIssueStallTest, ExtraSyncsOfOneRankAreNamedWithoutALatencyStall) {
  // Only the kernels after the syncs (3 to 5) start 5 us after their launch.
  Load syncing = Syncing(3);
  syncing.refilled_after_sync = true;
  const auto loads = std::map<int, Load>{{0, Syncing(1)}, {1, syncing}};
  EXPECT_TRUE(Window(loads).empty());
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence, HasSubstr("rank 1: GPU idle after synchronizations 1.9 % of the "
                                         "step time; synchronization: 15 sync calls"));
  // Without the extra cost (the GPU still busy at each return) it is silent.
  EXPECT_TRUE(Window(std::map<int, Load>{{0, Syncing(1)}, {1, Syncing(3)}}).empty());
}

TEST_F(KernelIssueStallTest, SteepCdfWithoutExcessSyncsIsSilent) {
  // The same latencies with few synchronizations: nothing says the host is
  // in the way (a small model's kernels may simply run back to back).
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(Ranks(1, {{0, Stalled(0, 2)}})).empty());
}

// One rank of two synchronizes inside every block from its first step: 3
// per step, under sync_cost_share, but 3x its peer's one and costlier than
// its peer's. The peer is the reference; the healthy rank is not reported.
TEST_F(KernelIssueStallTest, OneRankSynchronizingMoreThanItsPeerIsTheCause) {
  const auto loads = std::map<int, Load>{{0, Syncing(1)}, {1, Stalled(0, 3)}};
  EXPECT_TRUE(Window(loads).empty());  // persist_windows
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("3.0 per step (the other ranks make 1.0 at 0.00 % of the step); the GPU "
                        "idled 1.0 ms after they returned = 1.91 % of the step time"));
}

// A one-rank job that collects garbage in every step from its first: no
// peers, no clean first windows, no history. GC for >= gc_alone_share of the
// step with a steep CDF names it; a little GC (3 %) does not.
TEST_F(KernelIssueStallTest, GcFromTheFirstStepOfAOneRankJobIsNamed) {
  const auto gc = Ranks(1, {{0, Stalled(4)}});
  EXPECT_TRUE(Window(gc).empty());
  std::vector<Diagnosis> out = Window(gc);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "gc");
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
  EXPECT_THAT(out[0].evidence, HasSubstr("(steep CDF: the host never gets ahead)"));
  EXPECT_THAT(out[0].evidence, HasSubstr("Python GC: 20 collections"));
}

// Long steps: 15 kernels and 5 collectives with an issue latency per window,
// under min_samples (20). Each window is judged on the previous window's
// samples and its own, so the stall is found and persists.
TEST_F(KernelIssueStallTest, FewSamplesPerWindowAreToppedUpByThePreviousWindow) {
  Load gc = Stalled(4);
  gc.kernels = 3;
  gc.allreduces = 1;
  const auto loads = Ranks(1, {{0, gc}});
  EXPECT_TRUE(Window(loads).empty());  // 15 samples: not judged yet
  EXPECT_TRUE(Window(loads).empty());  // 30: stalled, persist_windows
  std::vector<Diagnosis> out = Window(loads);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "gc");
  EXPECT_THAT(out[0].evidence, HasSubstr("compute kernels: 100 % of issue latencies under 20 us"));
}

TEST_F(KernelIssueStallTest, LittleGcWithoutAReferenceIsNotNamed) {
  const auto little = Ranks(1, {{0, Stalled(1)}});
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(little).empty()) << "window " << w;
}

TEST_F(KernelIssueStallTest, SyncRateIsJudgedAgainstTheRanksOwnStart) {
  // Rank 1 synchronizes 5 times per step from the start (its own timing):
  // that is its baseline, not a stall.
  Window(Ranks(4, {{1, Syncing(5)}}));
  Window(Ranks(4, {{1, Syncing(5)}}));
  // Stalled with 6 per step: under sync_growth (1.5) x 5, so not blamed on
  // synchronization.
  const auto six = Ranks(4, {{1, Stalled(0, 6)}});
  Window(six);
  std::vector<Diagnosis> out = Window(six);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "host");
  // With 10 per step it is.
  const auto ten = Ranks(4, {{1, Stalled(0, 10)}});
  Window(ten);
  out = Window(ten);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "sync");
  EXPECT_THAT(out[0].evidence, HasSubstr("10.0 per step (this rank made 5.0 in its first windows; "
                                         "the other ranks make 0.0 at 0.00 % of the step)"));
}

TEST_F(KernelIssueStallTest, PreviousRunsCatchAStallFromTheFirstWindow) {
  // Previous runs of the job name on this GPU model issued at ~500 us.
  auto source = std::make_shared<FixedHistory>();
  history::RunBaseline run;
  for (const char* family : {history::kFamilyCompute, history::kFamilyCommunication}) {
    for (int i = 0; i < 200; ++i) run.issue_latency[family].Add(1500 + 5 * i);
  }
  source->AddRuns(2, run, "gpt", "Test GPU");
  detector_ = std::make_unique<KernelIssueStallDetector>(
      std::make_shared<WindowViews>(), Config(),
      std::make_shared<history::HistoryCache>(source, Config()));
  const auto stalled = Ranks(4, {{0, Stalled()}, {1, Stalled()}, {2, Stalled()}, {3, Stalled()}});
  EXPECT_TRUE(Window(stalled).empty());
  std::vector<Diagnosis> out = Window(stalled);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out[0].evidence, HasSubstr("compute kernels: median issue latency 5.0 us vs "));
  EXPECT_THAT(out[0].evidence, HasSubstr(" us in 2 previous runs of job 'gpt' on Test GPU"));
  EXPECT_THAT(out[0].evidence, Not(HasSubstr("this rank's history")));
}

}  // namespace
}  // namespace xpu::engine
