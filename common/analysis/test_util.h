// Helpers for the analysis unit tests: build a RankTrace by hand.
#ifndef XPU_COMMON_ANALYSIS_TEST_UTIL_H_
#define XPU_COMMON_ANALYSIS_TEST_UTIL_H_

#include "common/analysis/trace.h"
#include "xpu/formulas.h"

namespace xpu::analysis::testing {

inline OpSig Gemm(uint32_t m, uint32_t n, uint32_t k, uint8_t dt = XPU_DT_BF16) {
  OpSig s;
  s.kind = XPU_OP_GEMM;
  s.dtype = dt;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = 1;
  s.name = "cublasGemmEx";
  s.flops = 2.0 * m * n * k;
  return s;
}

inline OpSig Coll(uint16_t kind, uint64_t bytes, uint64_t comm, int32_t comm_rank, int32_t nranks,
                  int32_t peer = -1) {
  OpSig s;
  s.kind = kind;
  s.dtype = XPU_DT_BF16;
  s.bytes = bytes;
  s.busbw_factor = xpu_busbw_factor(kind, nranks);
  s.comm_id = comm;
  s.comm_rank = comm_rank;
  s.comm_nranks = nranks;
  s.peer = peer;
  s.name = "nccl";
  return s;
}

inline OpSig Simple(uint16_t kind) {
  OpSig s;
  s.kind = kind;
  s.name = "op";
  return s;
}

inline Op MakeOp(uint32_t sig_id, uint16_t kind, uint64_t start, uint64_t dur, uint32_t seq = 0,
                 uint16_t flags = XPU_REC_TIMED, uint16_t stream = 1, int32_t issue_ns = -1) {
  Op o;
  o.sig_id = sig_id;
  o.kind = kind;
  o.start_ns = start;
  o.dur_ns = dur;
  o.seq = seq;
  o.flags = flags;
  o.stream = stream;
  if (issue_ns >= 0) {
    o.issue_latency_ns = issue_ns;
    o.flags |= XPU_REC_ISSUE_LAT_VALID;
  }
  return o;
}

}  // namespace xpu::analysis::testing

#endif  // XPU_COMMON_ANALYSIS_TEST_UTIL_H_
