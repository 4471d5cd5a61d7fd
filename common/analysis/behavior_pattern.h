// behavior_pattern — PerfTracker's runtime behaviour pattern of a function
// on one worker over a profiling window (Guo et al., "PerfTracker: Online
// Performance Troubleshooting for Large-scale Model Training", §4.2):
//
//   P_{f,w} = (beta_{f,w}, mu_{f,w}, sigma_{f,w})                        (1)
//   beta_{f,w} = |{t in T : f is on w's critical path at t}| / |T|        (2, 3)
//   mu_{f,w}    = sum_e |L(e)| avg_U(L(e)) / sum_e |L(e)|                 (4)
//   sigma_{f,w} = sum_e |L(e)| std_U(L(e)) / sum_e |L(e)|                 (5)
//
// Critical path (§4.2, Fig. 9): function classes by priority — GPU compute
// kernels, then memory operations, then collective-communication kernels,
// then Python functions. A function's execution (or a part of it) is on the
// critical path iff no function of a higher-priority class runs at that
// time; for Python functions, additionally, none of its child functions
// (Python intervals nested in it on the same thread) runs.
//
// Where XPUTimer departs from the paper, and why:
//  - Utilization U. The paper samples hardware counters (SM, NVLink, PCIe,
//    CPU) at 10 kHz with nsys; the window has CUPTI kernel activity only, so
//    the "resource utilization" of an execution e is its pace relative to
//    the fastest execution of the same function anywhere in the job:
//        u(e) = r_f / |L(e)|,   r_f = min over workers and executions of |L(e)|
//    in (0, 1]: 1 = as fast as the function ever ran, 1/2 = twice as slow.
//    For the same work (data-parallel ranks run the same kernels) this is
//    the achieved throughput relative to the best observed.
//  - Critical execution duration L(e). Algorithm 1 trims idle stretches
//    inside an execution from utilization samples; without samples L(e) is
//    the whole execution [start, end] (a kernel record spans exactly its GPU
//    execution). A collective kernel therefore includes the wait for its
//    peers, which is why localization (behavior_distance.h) separates the
//    rank that spends more time in a function from the ranks that wait.
//  - sigma. With one pace value per execution, std_U within L(e) is 0; the
//    dispersion that remains observable, and that eq. 5 weights the same
//    way, is the |L(e)|-weighted standard deviation of u(e) across the
//    executions. With L(e) = e both moments follow from sums a worker can
//    ship without the job-wide r_f:
//        mu    = r_f * n / S,   S = sum_e |L(e)|, n = executions
//        sigma = sqrt(r_f^2 * sum_e (1/|L(e)|) / S - mu^2)
//    so the daemon ships beta and (n, S, sum 1/|L(e)|, min |L(e)|) per
//    function, and the engine fixes r_f once every worker has answered.
//  - T. The profiling window, narrowed to its complete training iterations
//    when step boundaries are known (step markers, else the period of the
//    collective sequence; steps.h), so that every worker is compared over
//    whole iterations.
//  - Python functions: host events of the xputimer package (XPU_OP_PY_*,
//    user annotations), identified by their name, not by the full call
//    stack; all threads count (the hook cannot tell the training thread).
//
// GPU functions are taken from profiling-window records only
// (XPU_REC_PROFILE_WINDOW, CUPTI kernel activity): the interposers' records
// of the same executions would count them twice. Kernels whose name starts
// with "nccl" are collective kernels; the rest are compute kernels; timed
// XPU_OP_MEMCPY records are memory operations.
//
// Pure functions over values; no I/O, no locking.
#ifndef XPU_COMMON_ANALYSIS_BEHAVIOR_PATTERN_H_
#define XPU_COMMON_ANALYSIS_BEHAVIOR_PATTERN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/analysis/steps.h"
#include "common/analysis/trace.h"

namespace xpu::analysis {

// Critical-path priority classes; a lower value wins.
enum class FunctionClass : uint8_t {
  kGpuCompute = 1,
  kMemory = 2,
  kCollective = 3,
  kPython = 4,
};
const char* FunctionClassName(FunctionClass c);
// Parses FunctionClassName's output (or the numeric value); false if unknown.
bool ParseFunctionClass(uint32_t value, FunctionClass* out);

// The class of `op` as a pattern function, false when it is not one (an
// interposer's GPU record, a step marker, a sync call...).
bool ClassifyFunction(const Op& op, const OpSig& sig, FunctionClass* cls);

// What one worker ships for one function: beta and the sums from which mu
// and sigma follow (see above).
struct FunctionSummary {
  std::string name;
  FunctionClass cls = FunctionClass::kGpuCompute;
  double beta = 0;            // eq. 2, in [0, 1]
  uint64_t critical_ns = 0;   // beta * |T|
  uint64_t executions = 0;    // n: executions starting in T with |L(e)| > 0
  uint64_t exec_ns = 0;       // S = sum |L(e)|
  double inv_exec_per_s = 0;  // sum 1/|L(e)|, in 1/s
  uint64_t min_exec_ns = 0;   // min |L(e)|; 0 when n = 0
};

struct BehaviorOptions {
  bool use_iterations = true;  // narrow T to complete iterations when known
  size_t max_functions = 256;  // shipped per worker, highest beta first
};

struct BehaviorSummary {
  uint64_t t0_ns = 0, t1_ns = 0;  // T
  uint32_t iterations = 0;        // complete iterations in T (0: T = the window)
  StepSource step_source = StepSource::kNone;
  std::vector<FunctionSummary> functions;  // beta descending, then exec_ns
  uint64_t functions_omitted = 0;          // beyond max_functions
  uint64_t window_kernels = 0;             // profiling-window records in T
};

// Summarizes the records of `trace` over [window_start_ns, window_end_ns].
BehaviorSummary SummarizeBehavior(const RankTrace& trace, uint64_t window_start_ns,
                                  uint64_t window_end_ns, const BehaviorOptions& options = {});

// P_{f,w} from a worker's summary and the job-wide reference duration r_f
// (eq. 1, 4, 5 with the pace utilization above). mu = sigma = 0 without
// executions (eq. 4 and 5 are 0/0 there: nothing ran, nothing was used).
struct Pattern {
  double beta = 0, mu = 0, sigma = 0;
};
Pattern PatternOf(const FunctionSummary& s, uint64_t reference_ns);

// Interval helpers (half-open [first, second) in ns), exposed for tests.
using Interval = std::pair<uint64_t, uint64_t>;
// Sorted, disjoint, non-empty union.
std::vector<Interval> UnionOf(std::vector<Interval> v);
// a \ b for sorted disjoint inputs.
std::vector<Interval> Subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);
uint64_t TotalLength(const std::vector<Interval>& v);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_BEHAVIOR_PATTERN_H_
