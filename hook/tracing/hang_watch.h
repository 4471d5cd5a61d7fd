// hook/tracing/hang_watch.h — per-process hang detection inside the hook.
//
// The completion thread is the only party that sees every outstanding traced
// op and its age. HangWatch turns what it sees into the progress table of the
// ring header (include/xpu/ring.h, xpu_ring_progress_v1): per communicator the
// last issued and last completed collective seq and the oldest outstanding
// collective (kind, bytes, launch time), plus a "suspect" block set when an op
// has been outstanding for longer than
//     threshold(sig) = max(floor, multiple x recent_max(sig))
// where recent_max is the largest launch-to-completion time observed for the
// signature, decayed by half every `decay_ns` so that one slow warm-up
// occurrence does not raise the threshold forever. An op that outlived its
// threshold (a stall: a stopped peer, a debugger) counts only as long as the
// threshold it broke, so one hang does not hide the next one. The daemon reads the table
// and forwards it; the engine decides (see engine/hang/).
//
// Defaults: floor 5 s (XPU_HANG_FLOOR_S), multiple 4 (XPU_HANG_MULTIPLE),
// decay 300 s (XPU_HANG_DECAY_S); XPU_HANG_FLOOR_S=0 disables the watch.
//
// Thread-safety: every method runs on the completion thread (or a test that
// plays it). Init allocates; nothing else does. The ring header is shared
// memory read by another process: every store follows the sequence-word
// protocol of ring.h.
#ifndef XPU_HOOK_TRACING_HANG_WATCH_H_
#define XPU_HOOK_TRACING_HANG_WATCH_H_

#include <cstdint>
#include <memory>

#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::hook {

struct HangWatchOptions {
  uint64_t floor_ns = 5ull * 1000000000ull;
  double multiple = 4.0;
  uint64_t decay_ns = 300ull * 1000000000ull;
};

// Reads XPU_HANG_FLOOR_S, XPU_HANG_MULTIPLE, XPU_HANG_DECAY_S (getenv; call
// at initialisation only). Bad values keep the default.
HangWatchOptions HangWatchOptionsFromEnv();

// What the watch needs to know about one outstanding op.
struct WatchedOp {
  uint32_t sig_id = 0;
  uint32_t seq = 0;
  uint64_t launch_ns = 0;
  uint16_t stream = 0;  // the records' stream index
};

class HangWatch {
 public:
  // `progress` points into the ring header page (may be null: the watch is
  // then off); `sigs` is the ring's signature table of `sig_capacity`
  // entries, read to learn the kind, size and communicator of an op.
  void Init(xpu_ring_progress_v1* progress, const xpu_signature_v1* sigs, uint32_t sig_capacity,
            const HangWatchOptions& options);
  bool enabled() const { return progress_ != nullptr && options_.floor_ns > 0; }

  // An op was handed to the completion thread (issue order per stream).
  void OnIssued(const WatchedOp& op, uint64_t now_ns);
  // An op completed (or was abandoned) after `duration_ns` from its launch.
  void OnCompleted(const WatchedOp& op, uint64_t duration_ns, uint64_t now_ns);
  // Periodic check (~10 Hz) with the oldest outstanding op of every stream
  // (`oldest` has `n` entries). Raises or clears the suspect block and
  // refreshes the pending fields of every communicator.
  void Check(const WatchedOp* oldest, uint32_t n, uint64_t now_ns);

  // Threshold for `sig_id` now (for tests and the record of a suspicion).
  uint64_t ThresholdNs(uint32_t sig_id, uint64_t now_ns) const;

 private:
  struct SigStat {
    uint64_t max_ns = 0;
    uint64_t max_at_ns = 0;
  };
  const xpu_signature_v1* Sig(uint32_t sig_id) const;
  // Entry for comm_id, created on first use; nullptr when the table is full.
  xpu_comm_progress_v1* Comm(uint64_t comm_id, const xpu_signature_v1& sig);
  static void BeginWrite(uint32_t* gen);
  static void EndWrite(uint32_t* gen);

  xpu_ring_progress_v1* progress_ = nullptr;
  const xpu_signature_v1* sigs_ = nullptr;
  uint32_t sig_capacity_ = 0;
  HangWatchOptions options_;
  std::unique_ptr<SigStat[]> stats_;  // by sig_id
  uint32_t suspect_sig_ = 0;
  uint32_t suspect_seq_ = 0;
  uint64_t suspect_launch_ns_ = 0;
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_HANG_WATCH_H_
