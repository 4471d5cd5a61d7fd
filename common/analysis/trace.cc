#include "common/analysis/trace.h"

#include <algorithm>
#include <utility>

#include "xpu/formulas.h"

namespace xpu::analysis {

OpSig OpSigFromAbi(const xpu_signature_v1& s, std::string name) {
  OpSig o;
  o.kind = s.kind;
  o.dtype = s.dtype;
  o.m = s.m;
  o.n = s.n;
  o.k = s.k;
  o.batch = s.batch ? s.batch : 1;
  o.gemm_flags = s.gemm_flags;
  o.name = std::move(name);
  o.flops = xpu_sig_flops(&s);
  o.bytes = xpu_sig_bytes(&s);
  o.busbw_factor = xpu_busbw_factor(s.kind, s.comm_nranks);
  o.comm_id = s.comm_id;
  o.comm_rank = s.comm_rank;
  o.comm_nranks = s.comm_nranks;
  o.peer = s.peer;
  return o;
}

Op OpFromRecord(const xpu_record_v1& r, uint16_t kind, int64_t offset_ns) {
  Op op;
  op.sig_id = r.sig_id;
  op.kind = kind;
  op.flags = r.flags;
  op.stream = r.stream;
  op.seq = r.seq;
  op.start_ns = static_cast<uint64_t>(static_cast<int64_t>(r.start_ns) - offset_ns);
  op.dur_ns = xpu_record_duration_ns(&r);
  op.issue_latency_ns = r.issue_latency_ns;
  return op;
}

void RankTrace::Sort() {
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& a, const Op& b) { return a.start_ns < b.start_ns; });
}

}  // namespace xpu::analysis
