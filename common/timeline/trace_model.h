// trace_model — what both trace writers (Perfetto, Chrome JSON) draw, built
// one rank at a time from the packed records:
//
//   * one process per rank; inside it, tracks by family and stream/thread:
//     "GPU compute s<N>" (kernels, GEMMs, graph launches), "GPU copy s<N>",
//     "GPU comm s<N>" (collectives, send/recv), "host t<N>" (Python and
//     synchronization events, step markers, annotations);
//   * slices never overlap on a track: an op that overlaps the previous one
//     on its track (two graph branches, a host interval inside another) goes
//     to a numbered lane "... #2", so both formats nest trivially and every
//     slice is balanced;
//   * zero-length ops are instants;
//   * Python call-site links (record.h XPU_OP_PY_CALLSITE, callsite_join.h)
//     are not drawn: the GEMM / collective they belong to carries the stack
//     as its "callsite" argument (innermost frame first, ';'-separated);
//   * flows: the kernels of one collective instance (comm_id, seq) on all its
//     members, ordered by (aligned) start time, first to last.
//
// Thread-safety: pure functions over values.
#ifndef XPU_COMMON_TIMELINE_TRACE_MODEL_H_
#define XPU_COMMON_TIMELINE_TRACE_MODEL_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/analysis/trace.h"
#include "common/timeline/clock_align.h"
#include "common/timeline/rank_dump.h"

namespace xpu::timeline {

struct TrackSlice {
  uint32_t track = 0;      // index into RankLayout::tracks
  const analysis::Op* op;  // into RankLayout::trace.ops
  bool instant = false;
  uint32_t callsite_sig = 0;  // stack (XPU_OP_PY_CALLSITE sig_id) of this launch, 0 = none
};

struct RankLayout {
  analysis::RankTrace trace;        // aligned times
  std::vector<std::string> tracks;  // names, index = track id within the rank
  std::vector<TrackSlice> slices;   // sorted by start
  uint64_t callsite_links = 0;      // link records (not drawn)
  uint64_t callsite_joined = 0;     // ... attached to their launch
};
RankLayout LayoutRank(const RankDump& d, int64_t offset_ns);

// Display name of an op: the kernel symbol, "cublasGemmEx 3072x512x1024",
// "allreduce 14.0 MiB", "py_gc gc", ... Kinds are named by the shared table
// (common/record/op_kind.h).
std::string EventName(const analysis::OpSig& s);

// One argument of an event, typed for both writers.
struct Arg {
  enum Type { kUint, kInt, kDouble, kString } type = kUint;
  const char* name = "";
  uint64_t u = 0;
  int64_t i = 0;
  double d = 0;
  std::string s;
};
// Shapes, FLOPs, bytes, busbw (member-local: bytes × factor / own duration),
// issue latency, seq, and the Python call stack (`callsite`: the stack's
// signature, or nullptr).
void EventArgs(const analysis::OpSig& s, const analysis::Op& op, std::vector<Arg>* out,
               const analysis::OpSig* callsite = nullptr);
// Fixed list of argument names (Perfetto interns them by index + 1).
const std::vector<std::string>& ArgNames();
int ArgIndex(const char* name);

// Flows across ranks: for every collective instance seen on >= 2 members,
// which member is first and last in aligned time.
class FlowIndex {
 public:
  enum Role { kNone, kFirst, kMiddle, kLast };
  void Build(const std::vector<RankDump>& ranks, const ClockAlignment& align);
  // `rank_index` is the position in the ranks vector given to Build.
  Role RoleOf(uint64_t flow_id, size_t rank_index, uint64_t aligned_start_ns) const;
  size_t flows() const { return flows_; }

 private:
  struct Ends {
    uint32_t members = 0;
    uint64_t first_ts = UINT64_MAX, last_ts = 0;
    size_t first_rank = 0, last_rank = 0;
  };
  std::unordered_map<uint64_t, Ends> ends_;
  size_t flows_ = 0;
};

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_TRACE_MODEL_H_
