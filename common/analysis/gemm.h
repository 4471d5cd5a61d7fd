// gemm — achieved GEMM throughput per signature on one rank, and why a shape
// may run below peak.
//
// Rule (XPUTimer §5.2.1): only GPU-timed GEMMs count (XPU_REC_TIMED), and a
// GEMM whose [start, end] overlaps any communication kernel on the same rank
// is excluded, because SM and memory contention with the collective makes its
// FLOPS falsely low; the untimed record of a one-rank communicator's
// collective (a local copy at most, its record an upper bound spanning the
// step) excludes nothing. TFLOPS = sum(flops) / sum(duration) over
// what is left.
#ifndef XPU_COMMON_ANALYSIS_GEMM_H_
#define XPU_COMMON_ANALYSIS_GEMM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/analysis/trace.h"

namespace xpu::analysis {

// Identity of a GEMM shape across ranks: "name MxNxKxB dtD" (same text as
// the engine's window_gemm rows).
std::string GemmKey(const OpSig& s);

struct GemmStat {
  std::string key;
  OpSig sig;
  uint64_t count = 0;  // timed, non-overlapping occurrences used
  uint64_t total_ns = 0;
  double flops = 0;
  uint64_t excluded_overlap = 0;  // timed but overlapping a collective
  uint64_t excluded_untimed = 0;  // not GPU-timed
  std::vector<double> call_tflops;  // per counted call, in order
  // With mark_concurrent, per counted call: whether it overlapped a timed
  // GPU op of the same rank on another stream (the job's own concurrent
  // work shares the device with it), and its issue latency in us (launch
  // to start on the GPU: how much work was queued ahead of it; -1 when
  // not known).
  std::vector<uint8_t> call_concurrent;
  std::vector<float> call_issue_us;
  double Tflops() const {
    return total_ns ? flops / (static_cast<double>(total_ns) * 1e-9) / 1e12 : 0;
  }
};

// Per GEMM key on one rank, over ops with start in [from_ns, to_ns).
std::map<std::string, GemmStat> GemmTflops(const RankTrace& t, uint64_t from_ns = 0,
                                           uint64_t to_ns = UINT64_MAX,
                                           bool mark_concurrent = false);

// Alignment required for a dimension, in elements: 128 bytes worth of the
// element type (64 for 16-bit types, 128 for 8-bit, 32 for 32-bit), the
// granularity tensor-core tiles and vectorized loads want.
uint32_t AlignmentElements(uint8_t dtype);
// One sentence per misaligned dimension, e.g. "k=8484 is not a multiple of
// 64 elements (bf16); padding to 8512 would align it". Empty when aligned.
std::vector<std::string> AlignmentIssues(const OpSig& s);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_GEMM_H_
