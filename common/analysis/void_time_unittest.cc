#include "common/analysis/void_time.h"

#include <gtest/gtest.h>

#include "common/analysis/test_util.h"

namespace xpu::analysis {
namespace {

using testing::Gemm;
using testing::MakeOp;
using testing::Simple;

// Two steps of 1000 us each, boundaries at 0, 1000 us, 2000 us (markers).
// Step 1: DataLoader 0..150 us; GPU: kernel 200..400, GEMM 500..700 launched
// at 350 (queued while the kernel ran: the 100 us gap 400..500 is minority
// time), kernel 900..1000 launched at 880 (host late: not minority).
// Step 2: DataLoader 1000..1300 us; GPU ops from 1350 us.
RankTrace TwoSteps() {
  RankTrace t;
  t.sigs[1] = Simple(XPU_OP_STEP);
  t.sigs[2] = Simple(XPU_OP_PY_DATALOADER);
  t.sigs[3] = Simple(XPU_OP_KERNEL);
  t.sigs[4] = Gemm(128, 128, 128);
  const uint64_t us = 1000;
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 0, 0, 1, XPU_REC_HOST));
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 1000 * us, 0, 2, XPU_REC_HOST));
  t.ops.push_back(MakeOp(1, XPU_OP_STEP, 2000 * us, 0, 3, XPU_REC_HOST));
  t.ops.push_back(MakeOp(2, XPU_OP_PY_DATALOADER, 0, 150 * us, 0, XPU_REC_HOST));
  t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, 200 * us, 200 * us, 1, XPU_REC_TIMED, 1, 10 * us));
  t.ops.push_back(MakeOp(4, XPU_OP_GEMM, 500 * us, 200 * us, 2, XPU_REC_TIMED, 1, 150 * us));
  t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, 900 * us, 100 * us, 3, XPU_REC_TIMED, 1, 20 * us));
  t.ops.push_back(MakeOp(2, XPU_OP_PY_DATALOADER, 1000 * us, 300 * us, 0, XPU_REC_HOST));
  t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, 1350 * us, 600 * us, 4, XPU_REC_TIMED, 1, 10 * us));
  t.Sort();
  return t;
}

TEST(VoidTest, InterAndMinorityFromDataLoaderAndQueuedGaps) {
  RankTrace t = TwoSteps();
  Steps s = FindSteps(t);
  VoidFigures v = ComputeVoid(t, s);
  EXPECT_EQ(v.steps, 2u);
  EXPECT_TRUE(v.inter_from_dataloader);
  EXPECT_NEAR(v.step_s, 2000e-6, 1e-12);
  // Step 1: no GPU op before the DataLoader -> no measurable gap. Step 2:
  // last GPU end before 1000 us is 1000 us; first start after 1300 us is
  // 1350 us -> 350 us.
  EXPECT_NEAR(v.inter_s, 350e-6, 1e-12);
  EXPECT_NEAR(v.dataloader_s, 450e-6, 1e-12);
  EXPECT_NEAR(v.minority_s, 100e-6, 1e-12);
  EXPECT_NEAR(v.VInter(), 0.175, 1e-9);
  EXPECT_NEAR(v.VMinority(), 100.0 / 1650.0, 1e-9);
}

TEST(VoidTest, CrossStreamWaitIsNotMinorityTime) {
  RankTrace t = TwoSteps();
  // A collective on stream 2 ending at 470 us: of the 400..500 us gap only
  // 470..500 us counts.
  t.sigs[5] = testing::Coll(XPU_OP_ALLREDUCE, 1000, 3, 0, 2);
  t.ops.push_back(MakeOp(5, XPU_OP_ALLREDUCE, 300000, 170000, 1, XPU_REC_TIMED, 2));
  t.Sort();
  VoidFigures v = ComputeVoid(t, FindSteps(t));
  EXPECT_NEAR(v.minority_s, 30e-6, 1e-12);
}

TEST(VoidTest, WithoutDataLoaderTheGapAroundTheBoundaryCounts) {
  RankTrace t = TwoSteps();
  t.ops.erase(std::remove_if(t.ops.begin(), t.ops.end(),
                             [](const Op& o) { return o.kind == XPU_OP_PY_DATALOADER; }),
              t.ops.end());
  VoidFigures v = ComputeVoid(t, FindSteps(t));
  EXPECT_FALSE(v.inter_from_dataloader);
  // Boundary 0: nothing before. Boundary 1000 us: last end 1000, first start
  // 1350 -> 350 us.
  EXPECT_NEAR(v.inter_s, 350e-6, 1e-12);
}

TEST(VoidTest, HostTimesAndIssueLatencies) {
  RankTrace t = TwoSteps();
  HostTime dl = HostEventTime(t, XPU_OP_PY_DATALOADER);
  EXPECT_EQ(dl.count, 2u);
  EXPECT_NEAR(dl.seconds, 450e-6, 1e-12);
  auto lat = IssueLatenciesUs(t, KernelFamily::kCompute);
  EXPECT_EQ(lat, (std::vector<double>{10, 150, 20, 10}));
  EXPECT_TRUE(IssueLatenciesUs(t, KernelFamily::kCommunication).empty());
}

// torch.cuda.synchronize() records a Python sync and, inside it, the
// cudaDeviceSynchronize it makes: one wait, counted once. A sync on another
// thread that overlaps only in part is another call; time is the union.
TEST(VoidTest, NestedSynchronizationsCountOnce) {
  RankTrace t;
  t.ops.push_back(MakeOp(1, XPU_OP_PY_SYNC, 100, 50, 0, XPU_REC_HOST));
  t.ops.push_back(MakeOp(2, XPU_OP_SYNC_DEVICE, 102, 45, 0, XPU_REC_HOST));
  t.ops.push_back(MakeOp(1, XPU_OP_PY_SYNC, 300, 20, 0, XPU_REC_HOST));
  t.ops.push_back(
      MakeOp(3, XPU_OP_SYNC_STREAM, 310, 30, 0, XPU_REC_HOST));  // to 340: overlaps in part
  t.ops.push_back(MakeOp(3, XPU_OP_SYNC_STREAM, 500, 10, 0, XPU_REC_HOST));
  t.Sort();
  HostTime s = SyncTime(t);
  EXPECT_EQ(s.count, 4u);
  EXPECT_NEAR(s.seconds, (50 + 40 + 10) * 1e-9, 1e-15);
  EXPECT_EQ(SyncTime(t, 200).count, 3u);  // by start
}


// GEMMs on a second stream that run inside a queued gap of the first are
// traced work: not minority time.
TEST(VoidTest, TracedWorkOnAnotherStreamIsNotMinorityTime) {
  RankTrace t = TwoSteps();
  // A GEMM on stream 3 from 380 to 450 us covers 50 us of the 400..500 gap.
  t.ops.push_back(MakeOp(4, XPU_OP_GEMM, 380000, 70000, 9, XPU_REC_TIMED, 3, 5000));
  t.Sort();
  VoidFigures v = ComputeVoid(t, FindSteps(t));
  EXPECT_NEAR(v.minority_s, 50e-6, 1e-12);
  EXPECT_NEAR(v.cross_s, 50e-6, 1e-12);
}

// The sampler's completion-tracked occurrences (not GPU-timed) launched
// between two timed ops ran in the gap between them: traced work, not
// minority time.
TEST(VoidTest, UntimedOccurrencesInAGapAreNotMinorityTime) {
  const uint64_t us = 1000;
  // A kernel occurrence (signature 3: its timed ones ran 200, 100 and 600
  // us, 300 on average) launched at 300 us, between the kernel's launch at
  // 190 us and the timed GEMM's at 350 us. The 400..500 us gap is shorter
  // than its 300 us: no minority time.
  RankTrace t = TwoSteps();
  t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, 300 * us, 170 * us, 5, XPU_REC_NOT_TIMED, 1));
  t.Sort();
  EXPECT_NEAR(ComputeVoid(t, FindSteps(t)).minority_s, 0, 1e-12);
  // A signature never timed in the trace: the gap counts from its observed
  // completion (470 us), 30 us.
  RankTrace untimed_sig = TwoSteps();
  untimed_sig.sigs[6] = Gemm(64, 64, 64);
  untimed_sig.ops.push_back(
      MakeOp(6, XPU_OP_GEMM, 300 * us, 170 * us, 5, XPU_REC_NOT_TIMED, 1));
  untimed_sig.Sort();
  EXPECT_NEAR(ComputeVoid(untimed_sig, FindSteps(untimed_sig)).minority_s, 30e-6, 1e-12);
  // One whose timed occurrences are short: only their time is traced work.
  // A kernel of signature 7 (timed once elsewhere in the trace: 20 us) in
  // the gap, made 400 us long: 380 us of minority time.
  RankTrace mean = TwoSteps();
  mean.sigs[7] = Simple(XPU_OP_KERNEL);
  mean.ops.push_back(MakeOp(7, XPU_OP_KERNEL, 1960 * us, 20 * us, 8, XPU_REC_TIMED, 1, 5 * us));
  mean.ops.push_back(MakeOp(7, XPU_OP_KERNEL, 300 * us, 60 * us, 5, XPU_REC_NOT_TIMED, 1));
  for (Op& op : mean.ops) {
    if (op.kind != XPU_OP_GEMM || !op.timed()) continue;
    op.start_ns = 800 * us;  // gap 400..800 us, still launched at 350 us
    op.issue_latency_ns = 450 * us;
  }
  mean.Sort();
  EXPECT_NEAR(ComputeVoid(mean, FindSteps(mean)).minority_s, 380e-6, 1e-12);
  // Launched before the kernel (it ran before it) or on another stream:
  // the gap stays minority time.
  RankTrace before = TwoSteps();
  before.ops.push_back(MakeOp(4, XPU_OP_GEMM, 150 * us, 400 * us, 5, XPU_REC_NOT_TIMED, 1));
  before.ops.push_back(MakeOp(4, XPU_OP_GEMM, 300 * us, 250 * us, 6, XPU_REC_NOT_TIMED, 2));
  before.Sort();
  EXPECT_NEAR(ComputeVoid(before, FindSteps(before)).minority_s, 100e-6, 1e-12);
}

// GPU idle after sync returns. Step 1 of TwoSteps: the GPU runs the kernel
// 200..400 us and the GEMM 500..700 us (launched at 350), the kernel
// 900..1000 us (launched at 880).
TEST(VoidTest, SyncIdleIsTheGapAfterTheReturnUntilTheNextLaunch) {
  RankTrace t = TwoSteps();
  const uint64_t us = 1000;
  t.sigs[6] = Simple(XPU_OP_SYNC_DEVICE);
  t.sigs[7] = Simple(XPU_OP_PY_SYNC);
  // Returns at 720 us (the GPU idle since 700): from the return to the next
  // launch at 880 us -> 160 us. A second sync returning at 800 waits on the same gap and
  // adds nothing.
  t.ops.push_back(MakeOp(6, XPU_OP_SYNC_DEVICE, 600 * us, 120 * us, 0, XPU_REC_HOST));
  t.ops.push_back(MakeOp(7, XPU_OP_PY_SYNC, 790 * us, 10 * us, 0, XPU_REC_HOST));
  // Returns at 300 us while the kernel runs to 400 us; the GEMM was queued
  // at 350, before the GPU went idle: no gap.
  t.ops.push_back(MakeOp(6, XPU_OP_SYNC_DEVICE, 250 * us, 50 * us, 0, XPU_REC_HOST));
  t.Sort();
  SyncIdle s = ComputeSyncIdle(t, FindSteps(t));
  EXPECT_EQ(s.gaps, 1u);
  EXPECT_NEAR(s.idle_s, 160e-6, 1e-12);
}

// A sync at the end of a step (the loop's own timing) followed by the
// inter-step gap: that gap is V_inter's, not a sync cost.
TEST(VoidTest, SyncIdleLeavesTheInterStepGapOut) {
  RankTrace t = TwoSteps();
  t.sigs[6] = Simple(XPU_OP_SYNC_DEVICE);
  t.ops.push_back(MakeOp(6, XPU_OP_SYNC_DEVICE, 950000, 60000, 0, XPU_REC_HOST));  // to 1010 us
  t.Sort();
  SyncIdle s = ComputeSyncIdle(t, FindSteps(t));
  EXPECT_EQ(s.gaps, 0u);
  EXPECT_EQ(s.idle_s, 0);
}

// Steps from the collective period (no markers, no DataLoader events): the
// longest gap after a sync in each step is the loop's own end-of-step sync
// and the host work between steps; the others are sync costs.
TEST(VoidTest, SyncIdleWithoutMarkersLeavesEachStepsLongestGapOut) {
  RankTrace t;
  t.sigs[3] = Simple(XPU_OP_KERNEL);
  t.sigs[6] = Simple(XPU_OP_SYNC_STREAM);
  const uint64_t us = 1000;
  for (uint64_t s = 0; s < 2; ++s) {
    const uint64_t o = s * 1000 * us;
    // Kernel 0..100; sync returns at 100, next launch at 130 (30 us);
    // kernel 130..400; sync returns at 400, the host sleeps until the next
    // step's first launch at 1000 (600 us).
    t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, o, 100 * us, 1, XPU_REC_TIMED, 1, 5 * us));
    t.ops.push_back(MakeOp(6, XPU_OP_SYNC_STREAM, o + 50 * us, 50 * us, 0, XPU_REC_HOST));
    t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, o + 135 * us, 265 * us, 2, XPU_REC_TIMED, 1, 5 * us));
    t.ops.push_back(MakeOp(6, XPU_OP_SYNC_STREAM, o + 300 * us, 100 * us, 0, XPU_REC_HOST));
  }
  t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, 2000 * us, 100 * us, 3, XPU_REC_TIMED, 1, 5 * us));
  t.Sort();
  Steps st;
  st.source = StepSource::kCollectivePeriod;
  st.boundaries_ns = {50 * us, 1050 * us, 2050 * us};  // phased on a collective mid-step
  SyncIdle s = ComputeSyncIdle(t, st);
  EXPECT_EQ(s.gaps, 2u);
  EXPECT_NEAR(s.idle_s, 60e-6, 1e-12);
  // With markers at the same places the containment rule alone applies:
  // the 600 us gaps contain no boundary and count.
  st.source = StepSource::kMarkers;
  EXPECT_EQ(ComputeSyncIdle(t, st).gaps, 4u);
}

// A step five times longer than the median (a checkpoint, or a window that
// holds the end of one burst of steps and the start of the next) is a
// pause: out of both void figures.
TEST(VoidTest, PauseStepsAreLeftOutOfTheVoidFigures) {
  RankTrace t;
  t.sigs[1] = Simple(XPU_OP_STEP);
  t.sigs[3] = Simple(XPU_OP_KERNEL);
  const uint64_t ms = 1000000;
  // Steps of 10 ms at 0, 10, 20; a 30 s pause after the step at 30 ms; then
  // steps at 30.04 s, 30.05 s.
  const std::vector<uint64_t> marks = {0, 10 * ms, 20 * ms, 30 * ms, 30040 * ms, 30050 * ms,
                                       30060 * ms};
  for (size_t i = 0; i < marks.size(); ++i) {
    t.ops.push_back(MakeOp(1, XPU_OP_STEP, marks[i], 0, static_cast<uint32_t>(i + 1), XPU_REC_HOST));
    if (i + 1 == marks.size()) break;
    // The GPU idles 1 ms after each boundary (10 % of a normal step).
    t.ops.push_back(MakeOp(3, XPU_OP_KERNEL, marks[i] + ms, 9 * ms, static_cast<uint32_t>(i + 1),
                           XPU_REC_TIMED, 1, 10000));
  }
  t.Sort();
  VoidFigures v = ComputeVoid(t, FindSteps(t));
  EXPECT_EQ(v.steps, 5u);
  EXPECT_EQ(v.pauses, 1u);
  EXPECT_NEAR(v.pause_s, 30.01, 1e-9);
  // 1 ms after each boundary but the first (nothing before it): 4 of 50 ms;
  // the step after the pause is measured from its own start.
  EXPECT_NEAR(v.VInter(), 0.08, 1e-9);
}

}  // namespace
}  // namespace xpu::analysis
