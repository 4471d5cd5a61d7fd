// hook/tracing/completion_tracker.h — the completion thread's view of every
// traced op in flight: which ops the GPU has finished, and their records.
//
// Ops arrive through the launching threads' lanes (op_lanes.h) and wait in a
// FIFO per (lane, stream): ops one thread launched on one stream, in launch
// order, so that stream order applies. An op leaves its FIFO, with its final
// record, when something proves that the GPU finished it:
//   * a marker completes: the end event of a timed op, or the non-timing
//     completion marker a launching thread records on a stream once per
//     XPU_MARKER_US (and after every collective the NCCL profiler plugin does
//     not time). It completes every earlier op of its FIFO;
//   * the NCCL profiler plugin wrote the timing record of a collective
//     (NotePluginCompletion): it completes that op and every earlier op of
//     its FIFO;
//   * the launching thread returned from a host synchronization of the
//     stream or the device (NoteHostSync): every earlier op of its FIFOs on
//     that stream / device.
// Records of ops completed this way are XPU_REC_NOT_TIMED with duration =
// completion evidence minus launch (an upper bound; loosest for ops just
// after a marker), except timed ops, which map their own events.
//
// Ops that nothing covers (the last ops a thread launched on a stream before
// it stopped launching there, without a sync) are retired after
// XPU_UNCOVERED_MS as XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED with duration 0
// (XPU_CNT_UNCOVERED): completion unknown, but the occurrence is on record.
// Collectives timed by the plugin are never retired this way: a hung
// collective must stay outstanding for the hang watch. When all
// XPU_PENDING_MAX places are taken, such uncovered ops are retired early
// (XPU_CNT_PENDING_FULL) to make room; when none is left to retire, new ops
// wait in their lanes.
//
// Hang watch: the oldest op of each FIFO that a marker (or the plugin) will
// decide is reported (WatchedHeads). Stream order bounds the op a stream is
// stuck on to the ops between the last completed marker and the first
// pending one; collectives are exact (their own marker or the plugin).
//
// Thread-safety: completion thread only (or a test playing it), except
// PushNotice, which any thread may call.
#ifndef XPU_HOOK_TRACING_COMPLETION_TRACKER_H_
#define XPU_HOOK_TRACING_COMPLETION_TRACKER_H_

#include <cstdint>
#include <memory>

#include "hook/tracing/hang_watch.h"
#include "hook/tracing/mpmc_queue.h"
#include "hook/tracing/op_lanes.h"

namespace xpu::hook {

struct Runtime;

// The plugin's record of (sig_id, seq) on `stream` was written at `ns`.
struct PluginNotice {
  uint64_t ns = 0;
  uint32_t sig_id = 0;
  uint32_t seq = 0;
  uint16_t stream = 0;
};

class CompletionTracker {
 public:
  void Init(Runtime* rt, HangWatch* watch, uint32_t capacity, uint64_t uncovered_ns);

  // Any thread (the plugin's record path). False when the queue is full.
  bool PushNotice(const PluginNotice& n) { return notices_.TryPush(n); }

  // Takes published lane entries into the FIFOs; returns how many.
  int Drain(uint64_t now_ns);
  // Completes what the evidence allows (markers, notices), retires
  // uncovered ops; returns records written.
  int Poll(uint64_t now_ns);
  // Drain + Poll, then writes everything still pending as XPU_REC_INCOMPLETE.
  int FlushIncomplete(uint64_t now_ns);

  uint32_t pending() const { return pending_; }
  // Oldest op of each FIFO whose completion some evidence will decide.
  uint32_t WatchedHeads(WatchedOp* out, uint32_t max) const;

 private:
  static constexpr uint32_t kMaxFifos = 4096;
  static constexpr uint32_t kMapSlots = 2 * kMaxFifos;  // power of two
  static constexpr uint32_t kMaxDeferred = 1024;
  static constexpr uint64_t kNoticeKeepNs = 100ull * 1000 * 1000;

  struct Node {
    LaneEntry e;
    uint32_t next;  // node index, 0 = end
  };
  struct Fifo {
    uint32_t key = 0;  // (lane << 16 | stream) + 1, 0 = unused
    uint32_t head = 0, tail = 0;
    uint32_t first_marker = 0;  // first node with an end event, 0 = none
    uint32_t count = 0;
    uint32_t active_pos = 0;  // index in active_ + 1, 0 = not active
  };

  Fifo* FifoFor(uint32_t lane, uint16_t stream, bool create);
  void Append(Fifo* f, uint32_t node);
  void Activate(Fifo* f);
  void Deactivate(Fifo* f);
  // Completes the nodes of `f` from its head through `last` (inclusive).
  int CompleteThrough(Fifo* f, uint32_t last, uint64_t done_ns, uint64_t now_ns);
  void FindFirstMarker(Fifo* f);
  void WriteCompleted(const Node& n, uint64_t done_ns, uint64_t now_ns);
  void WriteRetired(const Node& n, uint64_t now_ns, uint16_t extra_flags, bool zero_duration);
  void FreeNode(uint32_t node);
  bool TakeNotice(const PluginNotice& n, uint64_t now_ns, int* written);
  int Retire(uint64_t now_ns);
  // Retires the oldest op of a FIFO that no marker covers (pool full).
  bool EvictUncovered(uint64_t now_ns);

  Runtime* rt_ = nullptr;
  HangWatch* watch_ = nullptr;
  uint64_t uncovered_ns_ = 0;
  std::unique_ptr<Node[]> nodes_;  // index 0 unused
  uint32_t capacity_ = 0;
  uint32_t free_head_ = 0;  // free list through Node::next
  uint32_t pending_ = 0;
  std::unique_ptr<Fifo[]> fifos_;     // kMaxFifos, index 0 unused
  std::unique_ptr<uint32_t[]> map_;   // key hash -> fifo index
  std::unique_ptr<uint32_t[]> active_;
  uint32_t fifo_count_ = 0;
  uint32_t active_count_ = 0;
  MpmcQueueOf<PluginNotice> notices_;
  PluginNotice deferred_[kMaxDeferred];
  uint32_t deferred_count_ = 0;
  uint64_t next_retire_ns_ = 0;
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_COMPLETION_TRACKER_H_
