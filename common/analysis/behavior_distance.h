// behavior_distance — PerfTracker's localization (§4.3 of the paper): from
// the behaviour patterns P_{f,w} of every function f on every worker w
// (behavior_pattern.h), the two distances and the rule that names abnormal
// function executions.
//
// Distance from expectation (eq. 6, 7): with the expected range
//     R_f = [beta_l, beta_r] x [mu_l, mu_r] x [sigma_l, sigma_r]
// D_{f,w} is the smallest Manhattan distance from P_{f,w} to R_f, i.e. the
// sum over the three dimensions of how far the value lies outside its
// interval. Ranges from the paper: Python functions [0, 0.01] x [0,1] x [0,1]
// ("an LMT should not be bottlenecked by a Python function for > 1 % of
// the time"), collective communication [0, 0.3] x [0,1] x [0,1], GPU compute
// kernels [0,1]^3 (never unexpected). Memory operations are not given a
// range in the paper; they get [0,1]^3 too.
//
// Differential distance (eq. 8 - 10): max-normalize every dimension over the
// workers, P^_{f,w} = (beta/max beta, mu/max mu, sigma/max(sigma, mu)) (a
// dimension whose maximum is 0 stays 0), then
//     Delta_{f,w} = sum_{w' in W_N} I(P^_{f,w}, P^_{f,w'}) / N
// with I = 0 when the Manhattan distance is below delta (0.4), else 1; W_N
// is N = min(100, |W|) workers sampled from W (all of them when |W| <= 100;
// beyond, a sample seeded by the function's name so that a result is
// reproducible). Delta says how unique a worker's behaviour is, not how far.
//
// Where this departs from the paper: sigma is divided by the largest sigma
// or mu, whichever is larger, not by the largest sigma alone. sigma is the
// dispersion of the pace u in (0, 1], so the pace is its scale. Healthy
// workers all have a small sigma that jitters (timing noise, a busy host:
// 0.14 to 0.24 across eight equal ranks, mu 0.7). Divided by its own
// maximum, that jitter spans 0.58 to 1, alone past delta. Every worker then
// differs from half the others, M_f + k MAD_f rises above the largest
// possible Delta ((N-1)/N), and the one worker that runs f three times
// slower is no longer found. On the pace's scale the same jitter is 0.14,
// while a worker whose pace really scatters (sigma 0.5 against 0.05) still
// stands out by 0.6.
//
// Rule (eq. 11): f is abnormal on w when
//     beta_{f,w} > 0.01  and  (D_{f,w} > 0  or  Delta_{f,w} > M_f + k MAD_f)
// with M_f = median of Delta_{f,w'} over w', MAD_f = median |Delta - M_f|,
// k = 5.
//
// A worker that never ran f has P = (0, 0, 0) for it (eq. 2, 4, 5 with no
// execution). Each finding also says in which direction the worker differs
// (its beta and mu against the medians of the workers), which the detector
// uses to tell the worker that is slow in f from the workers that merely
// wait for it in f (a collective on the healthy ranks of a job with one
// slow rank is just as unique, in the other direction).
//
// Pure functions over values.
#ifndef XPU_COMMON_ANALYSIS_BEHAVIOR_DISTANCE_H_
#define XPU_COMMON_ANALYSIS_BEHAVIOR_DISTANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/analysis/behavior_pattern.h"

namespace xpu::analysis {

struct ExpectedRange {
  double beta_lo = 0, beta_hi = 1;
  double mu_lo = 0, mu_hi = 1;
  double sigma_lo = 0, sigma_hi = 1;
};

struct LocalizationOptions {
  double min_beta = 0.01;           // eq. 11
  double k = 5;                     // eq. 11
  double delta = 0.4;               // eq. 10
  size_t sample = 100;              // N = min(sample, |W|), eq. 9
  double python_beta_hi = 0.01;     // R_f for Python functions
  double collective_beta_hi = 0.3;  // R_f for collective kernels
  // Direction of a finding (AbnormalExecution::more_time / slower) counts
  // only beyond this relative change against the median (as slow_gpu's
  // min_drop): timing jitter makes every worker a little different, and a
  // worker 4 % above the median is not slow in the function.
  double min_change = 0.15;
  // And only when it costs the worker this share of its iteration beyond
  // the median worker (more time: beta - median beta; a slower pace: the
  // time the pace adds, beta x (1 - mu / median mu)): a function that takes
  // 1.5 % of the iteration, 20 % slower on one worker, costs it 0.3 % and
  // is timing noise, not the slowdown's cause.
  double min_excess_beta = 0.01;
};

ExpectedRange ExpectationFor(FunctionClass c, const LocalizationOptions& o);

// Eq. 7.
double DistanceFromExpectation(const Pattern& p, const ExpectedRange& r);
// Eq. 8.
std::vector<Pattern> MaxNormalize(const std::vector<Pattern>& v);
// Manhattan distance of two patterns.
double Manhattan(const Pattern& a, const Pattern& b);
// Eq. 9 and 10 over already normalized patterns; `seed` picks W_N when
// |W| > sample.
std::vector<double> DifferentialDistances(const std::vector<Pattern>& normalized, double delta,
                                          size_t sample, uint64_t seed);

// One worker's input: its function summaries (what its daemon shipped).
struct WorkerPatterns {
  int32_t rank = -1;
  std::string host;
  std::vector<FunctionSummary> functions;
};

// Every worker's figures for one function.
struct FunctionAnalysis {
  std::string name;
  FunctionClass cls = FunctionClass::kGpuCompute;
  uint64_t reference_ns = 0;        // r_f
  std::vector<Pattern> patterns;    // per worker (index as in the input)
  std::vector<Pattern> normalized;  // eq. 8
  std::vector<double> D;            // eq. 7
  std::vector<double> Delta;        // eq. 9
  double M = 0, MAD = 0;            // eq. 11
  double beta_median = 0, mu_median = 0;
};

struct AbnormalExecution {
  size_t function = 0;          // index into Localization::functions
  size_t worker = 0;            // index into the input
  bool by_expectation = false;  // D > 0
  bool by_difference = false;   // Delta > M + k MAD
  // Direction against the other workers: more critical-path time than the
  // median (beta above median x (1 + min_change)), or a slower pace (mu
  // below median x (1 - min_change)), each only when it costs the worker
  // more than min_excess_beta of its iteration.
  bool more_time = false;
  bool slower = false;
};

struct Localization {
  std::vector<FunctionAnalysis> functions;  // every function some worker ran
  std::vector<AbnormalExecution> abnormal;  // eq. 11, by function then worker
};

Localization Localize(const std::vector<WorkerPatterns>& workers,
                      const LocalizationOptions& o = {});

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_BEHAVIOR_DISTANCE_H_
