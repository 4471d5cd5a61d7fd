// common/analysis/trace.h — the plain input of every analysis: per rank, the
// op signatures and the records of a time span, already decoded. Free of
// gRPC and Protobuf so that the daemon (profiling windows), the engine
// (detectors) and `xpu timeline summary` (dumps) run the same analyses.
// OpSigFromAbi and OpFromRecord are the one conversion from the record ABI
// to this form that all of them use.
//
// Conventions: times are host-clock ns (record.h); durations honour
// XPU_REC_DUR_US; ops are sorted by start_ns. A RankTrace is a value: no
// references into engine state, no locking.
#ifndef XPU_COMMON_ANALYSIS_TRACE_H_
#define XPU_COMMON_ANALYSIS_TRACE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xpu/record.h"

namespace xpu::analysis {

struct OpSig {
  uint16_t kind = XPU_OP_NONE;
  uint8_t dtype = XPU_DT_UNKNOWN;
  uint32_t m = 0, n = 0, k = 0, batch = 1;
  uint8_t gemm_flags = 0;  // XPU_GEMM_TRANSA | XPU_GEMM_TRANSB
  std::string name;
  double flops = 0;         // xpu_sig_flops
  uint64_t bytes = 0;       // xpu_sig_bytes
  double busbw_factor = 0;  // xpu_busbw_factor
  uint64_t comm_id = 0;
  int32_t comm_rank = -1;
  int32_t comm_nranks = 0;
  int32_t peer = -1;  // send/recv peer (communicator rank)
  bool collective() const { return xpu_op_is_collective(kind) != 0; }
};

// 32 bytes, as many as the record it comes from: a window's ops are the
// engine's largest per-rank allocation. The duration has 48 bits (78 hours).
struct Op {
  Op() : dur_ns(0), stream(0) {}
  uint32_t sig_id = 0;
  uint16_t kind = XPU_OP_NONE;  // copied from the signature
  uint16_t flags = 0;
  uint32_t seq = 0;
  int32_t issue_latency_ns = 0;
  uint64_t start_ns = 0;
  uint64_t dur_ns : 48;
  uint64_t stream : 16;
  bool timed() const { return (flags & XPU_REC_TIMED) != 0; }
  bool issue_valid() const { return (flags & XPU_REC_ISSUE_LAT_VALID) != 0; }
  uint64_t end_ns() const { return start_ns + dur_ns; }
  // CPU launch time of a GPU op with a valid issue latency.
  uint64_t launch_ns() const {
    return issue_valid() && issue_latency_ns > 0
               ? start_ns - static_cast<uint64_t>(issue_latency_ns)
               : start_ns;
  }
};
static_assert(sizeof(Op) == 32, "an op is as large as its record");

// A rank's signatures by sig_id. An entry is either the table's own
// (operator[], for traces built by hand or from a dump) or shared with other
// tables (Share: the engine's window view gives the ranks of a job one copy
// of each signature they have alike, where a copy per rank per signature
// was the view's second largest part at 100k ranks). Shared entries are
// immutable: operator[] on one copies it first. Iterating yields
// (sig_id, const OpSig&) in sig_id order.
class SigTable {
  struct Entry {
    uint32_t id;
    std::shared_ptr<OpSig> sig;
  };

 public:
  SigTable() = default;
  SigTable(const std::map<uint32_t, OpSig>& m) { *this = m; }  // NOLINT: a map converts
  SigTable& operator=(const std::map<uint32_t, OpSig>& m);
  // The entry of `id`, inserted empty when missing, the table's own.
  OpSig& operator[](uint32_t id);
  // Sets the entry of `id` to `sig`, shared with whoever else holds it.
  void Share(uint32_t id, std::shared_ptr<const OpSig> sig);
  const OpSig* Find(uint32_t id) const {
    auto it = Lower(id);
    return it != entries_.end() && it->id == id ? it->sig.get() : nullptr;
  }
  size_t count(uint32_t id) const { return Find(id) ? 1 : 0; }
  const OpSig& at(uint32_t id) const;
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  class const_iterator {
   public:
    explicit const_iterator(std::vector<Entry>::const_iterator it) : it_(it) {}
    std::pair<uint32_t, const OpSig&> operator*() const { return {it_->id, *it_->sig}; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }

   private:
    std::vector<Entry>::const_iterator it_;
  };
  const_iterator begin() const { return const_iterator(entries_.begin()); }
  const_iterator end() const { return const_iterator(entries_.end()); }

 private:
  std::vector<Entry>::const_iterator Lower(uint32_t id) const {
    return std::lower_bound(entries_.begin(), entries_.end(), id,
                            [](const Entry& e, uint32_t v) { return e.id < v; });
  }
  std::vector<Entry> entries_;  // sorted by id
};

struct RankTrace {
  int32_t rank = -1;
  std::string host;
  SigTable sigs;        // by sig_id
  std::vector<Op> ops;  // sorted by start_ns

  const OpSig* Sig(uint32_t id) const { return sigs.Find(id); }
  // Sorts ops by start (stable for equal starts).
  void Sort();
};

// The analysis view of an ABI signature named `name`, with the derived
// figures of formulas.h (FLOPs, bytes, bus-bandwidth factor); batch 0 counts
// as 1.
OpSig OpSigFromAbi(const xpu_signature_v1& s, std::string name);

// One record as an Op of `kind` (the kind of its signature), its start moved
// by -offset_ns (clock alignment; 0 keeps the host clock). Durations honour
// XPU_REC_DUR_US.
Op OpFromRecord(const xpu_record_v1& r, uint16_t kind, int64_t offset_ns = 0);

// Op families used by several analyses.
inline bool IsComputeKernel(uint16_t kind) {
  return kind == XPU_OP_KERNEL || kind == XPU_OP_GEMM || kind == XPU_OP_GRAPH_LAUNCH;
}
inline bool IsGpuOp(uint16_t kind) {
  return IsComputeKernel(kind) || kind == XPU_OP_MEMCPY || xpu_op_is_collective(kind);
}
inline bool IsSyncEvent(uint16_t kind) {
  return (kind >= XPU_OP_SYNC_STREAM && kind <= XPU_OP_SYNC_EVENT) || kind == XPU_OP_PY_SYNC;
}

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_TRACE_H_
