// callsite_join — ties each Python call-site link record to the launch it
// belongs to, exactly as include/xpu/record.h (XPU_OP_PY_CALLSITE) defines:
// the hook writes, for a sampled GEMM / collective launched by a thread
// holding the GIL, a zero-length record whose sig_id is the stack and whose
// (issue_latency_ns, seq, stream) are the launch's (sig_id, seq, stream).
// The launch is the op with that key that is not an XPU_REC_PLUGIN timing
// supplement; if seq wrapped around, the one launched nearest in time.
// Links usually precede their launch in ring order (the completion thread
// writes the launch later), so the join is by key, never by position.
//
// A call-site record without a launch sig_id (issue_latency_ns == 0) is a
// free-standing event emitted from Python (xputimer.emit_callsite): not a
// link; the flame graph may still place it by time (flamegraph.h).
//
// Thread-safety: pure functions over values.
#ifndef XPU_COMMON_TIMELINE_CALLSITE_JOIN_H_
#define XPU_COMMON_TIMELINE_CALLSITE_JOIN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/analysis/trace.h"

namespace xpu::timeline {

// A link written by the hook (kind XPU_OP_PY_CALLSITE with a launch sig_id).
inline bool IsCallsiteLink(const analysis::Op& op) {
  return op.kind == XPU_OP_PY_CALLSITE && op.issue_latency_ns > 0;
}

struct CallsiteJoin {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  // Indexed like RankTrace::ops. For a link: its launch's index, or kNone
  // when the launch is not in the trace (overwritten, outside the dumped
  // window, still in flight). For a launch: the stack sig_id of its link
  // (0 = none).
  std::vector<size_t> launch_of;
  std::vector<uint32_t> stack_of;
  uint64_t links = 0;   // link records
  uint64_t joined = 0;  // ... whose launch was found
};

CallsiteJoin JoinCallsites(const analysis::RankTrace& t);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_CALLSITE_JOIN_H_
