// Behaviour patterns (PerfTracker eq. 1-5) on hand-built traces; every
// expected value is worked out in the comments.
#include "common/analysis/behavior_pattern.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/analysis/test_util.h"

namespace xpu::analysis {
namespace {

using testing::MakeOp;

constexpr uint16_t kWindow = XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW;
constexpr uint16_t kHost = XPU_REC_HOST;

OpSig Named(uint16_t kind, const char* name) {
  OpSig s;
  s.kind = kind;
  s.name = name;
  return s;
}

const FunctionSummary* Find(const BehaviorSummary& b, const std::string& name) {
  for (const FunctionSummary& f : b.functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(IntervalsTest, UnionSubtractLength) {
  EXPECT_EQ(UnionOf({{5, 10}, {1, 3}, {2, 4}, {10, 12}, {20, 20}}),
            (std::vector<Interval>{{1, 4}, {5, 12}}));
  EXPECT_EQ(Subtract({{0, 10}, {20, 30}}, {{2, 3}, {5, 25}}),
            (std::vector<Interval>{{0, 2}, {3, 5}, {25, 30}}));
  EXPECT_EQ(Subtract({{0, 10}}, {}), (std::vector<Interval>{{0, 10}}));
  EXPECT_TRUE(Subtract({{3, 4}}, {{0, 10}}).empty());
  EXPECT_EQ(TotalLength({{1, 4}, {5, 12}}), 10u);
}

// Window [0, 1000) ns, no iterations:
//   gemm (compute kernel)   [100,300) [500,600)         union 300 -> beta 0.30
//   nccl (collective)       [250,450)  minus compute    [300,450) -> beta 0.15
//   forward (Python, t1)    [0,400) minus child gc [50,150) = [0,50)+[150,400),
//                           minus compute/collective [100,450),[500,600)
//                           = [0,50)                               -> beta 0.05
//   gc (Python, t1)         [50,150) minus [100,...) = [50,100)    -> beta 0.05
// The interposer's own records of the GEMM and of a kernel launch are not
// profiling-window records and count for nothing.
TEST(BehaviorPatternTest, CriticalPathShares) {
  RankTrace t;
  t.sigs[1] = Named(XPU_OP_KERNEL, "gemm");
  t.sigs[2] = Named(XPU_OP_KERNEL, "ncclDevKernel_AllReduce");
  t.sigs[3] = Named(XPU_OP_PY_API, "forward");
  t.sigs[4] = Named(XPU_OP_PY_GC, "gc");
  t.sigs[5] = testing::Gemm(64, 64, 64);
  t.sigs[6] = Named(XPU_OP_KERNEL, "launch_traced");
  t.ops = {MakeOp(1, XPU_OP_KERNEL, 100, 200, 0, kWindow),
           MakeOp(1, XPU_OP_KERNEL, 500, 100, 0, kWindow),
           MakeOp(2, XPU_OP_KERNEL, 250, 200, 0, kWindow),
           MakeOp(3, XPU_OP_PY_API, 0, 400, 0, kHost, /*thread=*/1),
           MakeOp(4, XPU_OP_PY_GC, 50, 100, 0, kHost, /*thread=*/1),
           MakeOp(5, XPU_OP_GEMM, 100, 200),
           MakeOp(6, XPU_OP_KERNEL, 600, 300)};
  t.Sort();
  BehaviorSummary b = SummarizeBehavior(t, 0, 1000);
  EXPECT_EQ(b.t0_ns, 0u);
  EXPECT_EQ(b.t1_ns, 1000u);
  EXPECT_EQ(b.iterations, 0u);
  EXPECT_EQ(b.window_kernels, 3u);
  ASSERT_EQ(b.functions.size(), 4u);
  const FunctionSummary* gemm = Find(b, "gemm");
  const FunctionSummary* nccl = Find(b, "ncclDevKernel_AllReduce");
  const FunctionSummary* fwd = Find(b, "forward");
  const FunctionSummary* gc = Find(b, "gc");
  ASSERT_TRUE(gemm && nccl && fwd && gc);
  EXPECT_EQ(gemm->cls, FunctionClass::kGpuCompute);
  EXPECT_EQ(nccl->cls, FunctionClass::kCollective);
  EXPECT_EQ(fwd->cls, FunctionClass::kPython);
  EXPECT_DOUBLE_EQ(gemm->beta, 0.30);
  EXPECT_EQ(gemm->critical_ns, 300u);
  EXPECT_DOUBLE_EQ(nccl->beta, 0.15);
  EXPECT_DOUBLE_EQ(fwd->beta, 0.05);
  EXPECT_DOUBLE_EQ(gc->beta, 0.05);
  // Highest share first.
  EXPECT_EQ(b.functions[0].name, "gemm");
  EXPECT_EQ(b.functions[1].name, "ncclDevKernel_AllReduce");
  // Pace sums: gemm ran 200 and 100 ns.
  EXPECT_EQ(gemm->executions, 2u);
  EXPECT_EQ(gemm->exec_ns, 300u);
  EXPECT_DOUBLE_EQ(gemm->inv_exec_per_s, 1e9 / 200 + 1e9 / 100);
  EXPECT_EQ(gemm->min_exec_ns, 100u);
  EXPECT_EQ(fwd->executions, 1u);
  EXPECT_EQ(fwd->exec_ns, 400u);
}

// mu and sigma with r = 100 ns for executions of 200 and 100 ns:
// u = 0.5 (weight 200) and 1.0 (weight 100);
// mu = (200*0.5 + 100*1)/300 = 2/3;
// sigma^2 = (200*(0.5-2/3)^2 + 100*(1-2/3)^2)/300 = 1/18.
TEST(BehaviorPatternTest, PaceMoments) {
  FunctionSummary s;
  s.beta = 0.3;
  s.executions = 2;
  s.exec_ns = 300;
  s.inv_exec_per_s = 1e9 / 200 + 1e9 / 100;
  s.min_exec_ns = 100;
  Pattern p = PatternOf(s, 100);
  EXPECT_DOUBLE_EQ(p.beta, 0.3);
  EXPECT_NEAR(p.mu, 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(p.sigma, std::sqrt(1.0 / 18.0), 1e-9);
  // Every execution at the reference pace: mu 1, sigma 0.
  FunctionSummary even;
  even.executions = 3;
  even.exec_ns = 300;
  even.inv_exec_per_s = 3 * 1e9 / 100;
  even.min_exec_ns = 100;
  Pattern q = PatternOf(even, 100);
  EXPECT_NEAR(q.mu, 1.0, 1e-12);
  EXPECT_NEAR(q.sigma, 0.0, 1e-6);
  // Nothing ran: the pattern is zero.
  Pattern none = PatternOf(FunctionSummary{}, 100);
  EXPECT_EQ(none.mu, 0);
  EXPECT_EQ(none.sigma, 0);
}

// Step markers at 200, 500, 800 in a [0, 1000) window: T = [200, 800), two
// iterations. gemm [100,300) contributes [200,300), [500,600) all of it:
// 200 / 600. Only the execution that starts in T counts for the pace.
TEST(BehaviorPatternTest, WindowNarrowedToCompleteIterations) {
  RankTrace t;
  t.sigs[1] = Named(XPU_OP_KERNEL, "gemm");
  t.sigs[2] = Named(XPU_OP_STEP, "step");
  t.ops = {MakeOp(1, XPU_OP_KERNEL, 100, 200, 0, kWindow),
           MakeOp(1, XPU_OP_KERNEL, 500, 100, 0, kWindow), MakeOp(2, XPU_OP_STEP, 200, 0, 1, kHost),
           MakeOp(2, XPU_OP_STEP, 500, 0, 2, kHost), MakeOp(2, XPU_OP_STEP, 800, 0, 3, kHost)};
  t.Sort();
  BehaviorSummary b = SummarizeBehavior(t, 0, 1000);
  EXPECT_EQ(b.t0_ns, 200u);
  EXPECT_EQ(b.t1_ns, 800u);
  EXPECT_EQ(b.iterations, 2u);
  EXPECT_EQ(b.step_source, StepSource::kMarkers);
  ASSERT_EQ(b.functions.size(), 1u);
  EXPECT_DOUBLE_EQ(b.functions[0].beta, 200.0 / 600.0);
  EXPECT_EQ(b.functions[0].executions, 1u);
  EXPECT_EQ(b.functions[0].exec_ns, 100u);
  // Without iterations the whole window counts: 300 / 1000.
  BehaviorOptions o;
  o.use_iterations = false;
  EXPECT_DOUBLE_EQ(SummarizeBehavior(t, 0, 1000, o).functions[0].beta, 0.3);
}

// A checkpoint announced as BEGIN (at 100) and END (100, 300 ns long), and a
// second one begun at 700 and still open: [100,400) and [700,1000) of a
// [0,1000) window, 600 ns.
TEST(BehaviorPatternTest, HostIntervalsFromBeginEnd) {
  RankTrace t;
  t.sigs[1] = Named(XPU_OP_PY_CHECKPOINT, "checkpoint.save");
  t.ops = {MakeOp(1, XPU_OP_PY_CHECKPOINT, 100, 0, 0, kHost | XPU_REC_BEGIN, 2),
           MakeOp(1, XPU_OP_PY_CHECKPOINT, 100, 300, 0, kHost | XPU_REC_END, 2),
           MakeOp(1, XPU_OP_PY_CHECKPOINT, 700, 0, 0, kHost | XPU_REC_BEGIN, 2)};
  t.Sort();
  BehaviorSummary b = SummarizeBehavior(t, 0, 1000);
  ASSERT_EQ(b.functions.size(), 1u);
  EXPECT_DOUBLE_EQ(b.functions[0].beta, 0.6);
  EXPECT_EQ(b.functions[0].executions, 2u);
  EXPECT_EQ(b.functions[0].exec_ns, 600u);
}

TEST(BehaviorPatternTest, MaxFunctionsKeepsTheLargestShares) {
  RankTrace t;
  for (uint32_t i = 1; i <= 5; ++i) {
    t.sigs[i] = Named(XPU_OP_KERNEL, ("k" + std::to_string(i)).c_str());
    // Disjoint, kernel i runs i*10 ns.
    t.ops.push_back(MakeOp(i, XPU_OP_KERNEL, i * 100, i * 10, 0, kWindow));
  }
  t.Sort();
  BehaviorOptions o;
  o.max_functions = 2;
  BehaviorSummary b = SummarizeBehavior(t, 0, 1000, o);
  ASSERT_EQ(b.functions.size(), 2u);
  EXPECT_EQ(b.functions[0].name, "k5");
  EXPECT_EQ(b.functions[1].name, "k4");
  EXPECT_EQ(b.functions_omitted, 3u);
}

}  // namespace
}  // namespace xpu::analysis
