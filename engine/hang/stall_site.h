// engine/hang/stall_site.h — where a rank that makes no progress outside a
// collective sits, from the evidence that costs no debugger first: the
// hook's overdue op (a GPU kernel that never completes), the Python stacks
// (data loading or other Python code), the open host intervals, then native
// stacks and the thread states (spinning or blocked, in which kernel wait
// channel).
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_STALL_SITE_H_
#define XPU_ENGINE_HANG_STALL_SITE_H_

#include <string>
#include <string_view>

#include "engine/hang/classify.h"

namespace xpu::engine::hang {

struct StallSite {
  enum class Kind { kUnknown, kGpuKernel, kDataLoading, kPython, kNative };
  Kind kind = Kind::kUnknown;
  std::string frame;    // the innermost telling frame, or the kernel's name
  std::string summary;  // "stuck in data loading at _next_data (dataloader.py)"
  std::string team;     // who acts on it
};
const char* StallKindName(StallSite::Kind k);

// `now_ns` (host clock) ages the overdue op; 0 leaves the age out.
StallSite WhereStalled(const RankEvidence& r, uint64_t now_ns);

// A GPU kernel that is overdue on the rank and is the one running on its
// stream: not a collective, no collective outstanding for longer (an op
// queued behind an incomplete collective waits for it), and the rank is not
// inside the kernel of a collective issued after it (the GPU ran past the
// kernel: the hook's mark of its completion is what waits, behind the
// collective). Classify also drops a kernel issued before a collective that
// a peer never issued (classify.cc: the missing peer explains the wait, and
// from the rank's own evidence the kernel cannot be told from one whose
// completion mark waits behind the collective).
bool HasStuckKernel(const RankEvidence& r);

// Frames of loading data: torch's DataLoader and its workers' queues,
// fetchers and sockets.
bool IsDataLoadingFrame(std::string_view frame);

// The main thread's line of RankEvidence::threads ("tid name state wchan"),
// empty when unknown.
std::string MainThreadState(const RankEvidence& r);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_STALL_SITE_H_
