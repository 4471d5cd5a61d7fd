// PerfTracker's localization (eq. 6-11) with hand-computed values.
#include "common/analysis/behavior_distance.h"

#include <gtest/gtest.h>

namespace xpu::analysis {
namespace {

// n executions of d ns each, beta given.
FunctionSummary Uniform(const std::string& name, FunctionClass cls, double beta, uint64_t n,
                        uint64_t d) {
  FunctionSummary s;
  s.name = name;
  s.cls = cls;
  s.beta = beta;
  s.executions = n;
  s.exec_ns = n * d;
  s.inv_exec_per_s = static_cast<double>(n) * 1e9 / static_cast<double>(d);
  s.min_exec_ns = d;
  return s;
}

TEST(BehaviorDistanceTest, DistanceFromExpectation) {
  LocalizationOptions o;
  // Python: beta 0.05 against [0, 0.01] -> 0.04; mu and sigma inside [0,1].
  EXPECT_NEAR(DistanceFromExpectation({0.05, 0.5, 0.1}, ExpectationFor(FunctionClass::kPython, o)),
              0.04, 1e-12);
  EXPECT_NEAR(
      DistanceFromExpectation({0.5, 0.5, 0.1}, ExpectationFor(FunctionClass::kCollective, o)), 0.2,
      1e-12);
  EXPECT_EQ(DistanceFromExpectation({0.9, 1.0, 0.5}, ExpectationFor(FunctionClass::kGpuCompute, o)),
            0);
  EXPECT_EQ(
      DistanceFromExpectation({0.25, 0.5, 0.1}, ExpectationFor(FunctionClass::kCollective, o)), 0);
  // Every dimension outside: the gaps add up (Manhattan to the box).
  ExpectedRange r{0, 0.1, 0.5, 0.6, 0, 0.2};
  EXPECT_NEAR(DistanceFromExpectation({0.3, 0.2, 0.5}, r), 0.2 + 0.3 + 0.3, 1e-12);
}

TEST(BehaviorDistanceTest, MaxNormalizeAndDifferentialDistance) {
  std::vector<Pattern> n = MaxNormalize({{0.2, 0.5, 0}, {0.4, 1.0, 0}});
  EXPECT_DOUBLE_EQ(n[0].beta, 0.5);
  EXPECT_DOUBLE_EQ(n[0].mu, 0.5);
  EXPECT_EQ(n[0].sigma, 0);  // max 0: stays 0
  EXPECT_DOUBLE_EQ(n[1].beta, 1.0);
  // One worker at (1, 1, 0), three at (0.5, 0.5, 0): distance 1 >= delta.
  // Delta_0 = 3/4 (it differs from the three others, not from itself),
  // Delta_i = 1/4 (differs from worker 0 only).
  std::vector<double> d =
      DifferentialDistances({{1, 1, 0}, {0.5, 0.5, 0}, {0.5, 0.5, 0}, {0.5, 0.5, 0}}, 0.4, 100, 1);
  EXPECT_DOUBLE_EQ(d[0], 0.75);
  EXPECT_DOUBLE_EQ(d[1], 0.25);
  EXPECT_DOUBLE_EQ(d[3], 0.25);
  // Below delta counts as the same behaviour.
  std::vector<double> same = DifferentialDistances({{1, 1, 0}, {0.85, 0.9, 0}}, 0.4, 100, 1);
  EXPECT_EQ(same[0], 0);
  EXPECT_EQ(same[1], 0);
}

// Eight ranks of a busy host, rank 5 running the kernel three times slower
// (figures of a profiling window). The healthy ranks' sigma jitters between
// 0.14 and 0.24: divided by the largest sigma that alone is past delta, six
// ranks differ from some others, and the threshold M + 5 MAD = 0.375 +
// 5 x 0.125 was above rank 5's 7/8. On the pace's scale (the largest mu,
// 0.75) the healthy ranks are alike and rank 5 alone differs.
TEST(BehaviorDistanceTest, SigmaJitterOfHealthyWorkersDoesNotHideTheSlowOne) {
  const std::vector<Pattern> p = {
      {0.195, 0.749, 0.140}, {0.204, 0.716, 0.195}, {0.210, 0.694, 0.212}, {0.217, 0.673, 0.241},
      {0.202, 0.724, 0.174}, {0.580, 0.252, 0.054}, {0.214, 0.682, 0.238}, {0.197, 0.741, 0.150}};
  const std::vector<Pattern> n = MaxNormalize(p);
  EXPECT_NEAR(n[3].sigma, 0.241 / 0.749, 1e-12);
  EXPECT_DOUBLE_EQ(n[0].mu, 1.0);
  const std::vector<double> d = DifferentialDistances(n, 0.4, 100, 1);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_DOUBLE_EQ(d[i], i == 5 ? 0.875 : 0.125) << i;

  // A worker whose pace really scatters still stands out.
  std::vector<Pattern> scatter(8, Pattern{0.2, 0.7, 0.05});
  scatter[2].sigma = 0.5;
  const std::vector<double> s = DifferentialDistances(MaxNormalize(scatter), 0.4, 100, 1);
  EXPECT_DOUBLE_EQ(s[2], 0.875);
  EXPECT_DOUBLE_EQ(s[0], 0.125);
}

// Four workers. gemm: worker 0 spends beta 0.4 in 2 x 200 ns, the others
// beta 0.2 in 2 x 100 ns. r = 100: mu_0 = 100*2/400 = 0.5, mu_i = 1;
// sigma 0 everywhere (equal executions). Normalized: (1, 0.5, 0) vs
// (0.5, 1, 0), distance 1 -> Delta = (3/4, 1/4, 1/4, 1/4), M = 1/4,
// MAD = 0: worker 0 is abnormal (3/4 > 1/4), the others are not (1/4 is
// not > 1/4). It spends more time and runs slower than the median.
// allreduce: worker 0 beta 0.05, the others 0.35 (they wait for worker 0),
// one 100 ns execution each. Against [0, 0.3]: D = 0.05 on workers 1-3 ->
// abnormal by expectation. Normalized beta 0.05/0.35 vs 1: worker 0 is
// unique (Delta 3/4) and abnormal by difference, with less time.
// dataloader: beta 0.005 everywhere, below the 1 % floor: never abnormal.
TEST(BehaviorDistanceTest, LocalizeOneSlowWorker) {
  std::vector<WorkerPatterns> w(4);
  for (int i = 0; i < 4; ++i) {
    w[i].rank = i;
    w[i].host = "h";
    const bool slow = i == 0;
    w[i].functions.push_back(
        Uniform("gemm", FunctionClass::kGpuCompute, slow ? 0.4 : 0.2, 2, slow ? 200 : 100));
    w[i].functions.push_back(
        Uniform("ncclDevKernel_AllReduce", FunctionClass::kCollective, slow ? 0.05 : 0.35, 1, 100));
    w[i].functions.push_back(Uniform("dataloader", FunctionClass::kPython, 0.005, 1, 100));
  }
  Localization l = Localize(w);
  ASSERT_EQ(l.functions.size(), 3u);
  // Map order: compute (1), collective (3), Python (4).
  const FunctionAnalysis& gemm = l.functions[0];
  EXPECT_EQ(gemm.name, "gemm");
  EXPECT_EQ(gemm.reference_ns, 100u);
  EXPECT_DOUBLE_EQ(gemm.patterns[0].mu, 0.5);
  EXPECT_DOUBLE_EQ(gemm.patterns[1].mu, 1.0);
  EXPECT_NEAR(gemm.patterns[0].sigma, 0, 1e-6);
  EXPECT_DOUBLE_EQ(gemm.Delta[0], 0.75);
  EXPECT_DOUBLE_EQ(gemm.Delta[2], 0.25);
  EXPECT_DOUBLE_EQ(gemm.M, 0.25);
  EXPECT_DOUBLE_EQ(gemm.MAD, 0);
  EXPECT_NEAR(l.functions[1].D[1], 0.05, 1e-12);
  EXPECT_EQ(l.functions[1].D[0], 0);

  ASSERT_EQ(l.abnormal.size(), 5u);
  const AbnormalExecution& a = l.abnormal[0];
  EXPECT_EQ(a.function, 0u);
  EXPECT_EQ(a.worker, 0u);
  EXPECT_TRUE(a.by_difference);
  EXPECT_FALSE(a.by_expectation);
  EXPECT_TRUE(a.more_time);
  EXPECT_TRUE(a.slower);
  // allreduce on worker 0: unique, but in the other direction.
  EXPECT_EQ(l.abnormal[1].function, 1u);
  EXPECT_EQ(l.abnormal[1].worker, 0u);
  EXPECT_TRUE(l.abnormal[1].by_difference);
  EXPECT_FALSE(l.abnormal[1].more_time);
  for (size_t i = 2; i < 5; ++i) {
    EXPECT_EQ(l.abnormal[i].function, 1u);
    EXPECT_EQ(l.abnormal[i].worker, i - 1);
    EXPECT_TRUE(l.abnormal[i].by_expectation);
    EXPECT_FALSE(l.abnormal[i].by_difference);
  }
}

// Eight workers; worker 0 runs a kernel 25 % slower (2 x 125 ns against
// 2 x 100 ns, mu 0.8 against 1) and spends 27 % more of its iteration in it.
// Normalized (1, 0.8, 0) against (0.79, 1, 0): distance 0.41 >= delta, so
// worker 0 is unique (Delta 7/8 > M 1/8). When the kernel takes 1.5 % of
// the iteration, that costs worker 0 0.4 % (beta 0.019 - 0.015) and 0.4 %
// (0.019 x (1 - 0.8)): not slow in it. At 15 %, 4 % and 3.8 %: slow in it.
TEST(BehaviorDistanceTest, ASmallFunctionsJitterIsNotSlowness) {
  for (const double beta : {0.015, 0.15}) {
    std::vector<WorkerPatterns> w(8);
    for (int i = 0; i < 8; ++i) {
      w[i].rank = i;
      w[i].functions.push_back(
          i == 0 ? Uniform("dropout", FunctionClass::kGpuCompute, beta * 19 / 15, 2, 125)
                 : Uniform("dropout", FunctionClass::kGpuCompute, beta, 2, 100));
    }
    const Localization l = Localize(w);
    ASSERT_EQ(l.abnormal.size(), 1u) << beta;
    const AbnormalExecution& a = l.abnormal[0];
    EXPECT_EQ(a.worker, 0u);
    EXPECT_TRUE(a.by_difference);
    EXPECT_EQ(a.more_time, beta > 0.1) << beta;
    EXPECT_EQ(a.slower, beta > 0.1) << beta;
  }
}

// Three behaviours of one kernel, with r = 100 ns:
//   a = (beta 0.2, 1 x 100 ns) -> P = (0.2, 1, 0), normalized (1/3, 1, 0)
//   b = (beta 0.6, 1 x 100 ns) -> P = (0.6, 1, 0), normalized (1, 1, 0)
//   c = (beta 0.2, 1 x 400 ns) -> P = (0.2, 1/4, 0), normalized (1/3, 1/4, 0)
// d(a,b) = 2/3, d(a,c) = 3/4, d(b,c) = 17/12: all >= delta = 0.4.
TEST(BehaviorDistanceTest, MedianAbsoluteDeviationRule) {
  auto worker = [](int rank, double beta, uint64_t d) {
    WorkerPatterns w;
    w.rank = rank;
    w.functions.push_back(Uniform("k", FunctionClass::kGpuCompute, beta, 1, d));
    return w;
  };
  // a, a, a, b, c: Delta = (2/5, 2/5, 2/5, 4/5, 4/5), M = 2/5, MAD = 0:
  // b and c are abnormal.
  Localization l = Localize({worker(0, 0.2, 100), worker(1, 0.2, 100), worker(2, 0.2, 100),
                             worker(3, 0.6, 100), worker(4, 0.2, 400)});
  ASSERT_EQ(l.functions.size(), 1u);
  EXPECT_DOUBLE_EQ(l.functions[0].Delta[0], 0.4);
  EXPECT_DOUBLE_EQ(l.functions[0].Delta[3], 0.8);
  EXPECT_DOUBLE_EQ(l.functions[0].Delta[4], 0.8);
  EXPECT_DOUBLE_EQ(l.functions[0].M, 0.4);
  EXPECT_DOUBLE_EQ(l.functions[0].MAD, 0);
  ASSERT_EQ(l.abnormal.size(), 2u);
  EXPECT_EQ(l.abnormal[0].worker, 3u);
  EXPECT_EQ(l.abnormal[1].worker, 4u);

  // a, a, b, c: Delta = (1/2, 1/2, 3/4, 3/4), M = 5/8, MAD = 1/8. With
  // k = 5 the bar is 5/8 + 5/8 = 1.25: nobody is unique enough. With
  // k = 0.5 it is 5/8 + 1/16 = 0.6875: b and c pass.
  std::vector<WorkerPatterns> v = {worker(0, 0.2, 100), worker(1, 0.2, 100), worker(2, 0.6, 100),
                                   worker(3, 0.2, 400)};
  Localization m = Localize(v);
  EXPECT_DOUBLE_EQ(m.functions[0].M, 0.625);
  EXPECT_DOUBLE_EQ(m.functions[0].MAD, 0.125);
  EXPECT_TRUE(m.abnormal.empty());
  LocalizationOptions o;
  o.k = 0.5;
  Localization n = Localize(v, o);
  ASSERT_EQ(n.abnormal.size(), 2u);
  EXPECT_EQ(n.abnormal[0].worker, 2u);
  EXPECT_EQ(n.abnormal[1].worker, 3u);
}

TEST(BehaviorDistanceTest, IdenticalWorkersAreNeverAbnormal) {
  std::vector<WorkerPatterns> w(8);
  for (int i = 0; i < 8; ++i) {
    w[i].rank = i;
    w[i].functions.push_back(Uniform("gemm", FunctionClass::kGpuCompute, 0.5, 10, 1000));
    w[i].functions.push_back(
        Uniform("ncclDevKernel_AllReduce", FunctionClass::kCollective, 0.2, 4, 500));
  }
  Localization l = Localize(w);
  EXPECT_TRUE(l.abnormal.empty());
  for (const FunctionAnalysis& f : l.functions) {
    for (double d : f.Delta) EXPECT_EQ(d, 0);
  }
}

// A function one worker never ran: P = (0, 0, 0) there.
TEST(BehaviorDistanceTest, MissingFunctionIsZero) {
  std::vector<WorkerPatterns> w(3);
  for (int i = 0; i < 3; ++i) {
    w[i].rank = i;
    if (i != 2)
      w[i].functions.push_back(Uniform("only_some", FunctionClass::kGpuCompute, 0.3, 1, 100));
  }
  Localization l = Localize(w);
  ASSERT_EQ(l.functions.size(), 1u);
  EXPECT_EQ(l.functions[0].patterns[2].beta, 0);
  EXPECT_EQ(l.functions[0].patterns[2].mu, 0);
  // Delta: 1/3, 1/3, 2/3; M = 1/3, MAD = 0. Worker 2 is unique but its
  // beta (0) is below the floor: not abnormal; the others are not unique.
  EXPECT_TRUE(l.abnormal.empty());
}

// |W| = 150 > N = 100: W_N is a seeded sample; the outlier still stands
// out, and the result does not change from one call to the next.
TEST(BehaviorDistanceTest, SampledPeersForLargeJobs) {
  std::vector<WorkerPatterns> w(150);
  for (int i = 0; i < 150; ++i) {
    w[i].rank = i;
    w[i].functions.push_back(
        Uniform("gemm", FunctionClass::kGpuCompute, i == 77 ? 0.8 : 0.4, 2, i == 77 ? 200 : 100));
  }
  Localization a = Localize(w);
  Localization b = Localize(w);
  ASSERT_EQ(a.abnormal.size(), 1u);
  EXPECT_EQ(a.abnormal[0].worker, 77u);
  EXPECT_EQ(a.functions[0].Delta, b.functions[0].Delta);
  EXPECT_GE(a.functions[0].Delta[77], 0.99);
  EXPECT_LE(a.functions[0].Delta[0], 0.01);
}

}  // namespace
}  // namespace xpu::analysis
