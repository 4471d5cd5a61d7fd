// hook/tracing/pending_table.h — the table of in-flight GPU ops between
// BeginGpuOp/EndGpuOp (launch threads) and the completion thread, plus the
// per-signature sampler.
//
// A slot is owned by exactly one party at a time: free list -> launch thread
// (Acquire..Submit) -> completion thread (PopSubmitted..Release) -> free list.
// The hand-offs go through bounded lock-free queues whose release/acquire
// ordering publishes the slot's contents. Both queues hold every slot, so a
// push never fails; running out of free slots is XPU_CNT_PENDING_FULL.
//
// Thread-safety: as above; Init once before use.
#ifndef XPU_HOOK_TRACING_PENDING_TABLE_H_
#define XPU_HOOK_TRACING_PENDING_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "hook/tracing/mpmc_queue.h"

namespace xpu::hook {

struct PendingOp {
  uint64_t launch_ns = 0;
  uint32_t sig_id = 0;
  uint32_t seq = 0;
  uint32_t start_ev = 0;   // EventPool handle, 0 when not timed
  uint32_t end_ev = 0;     // EventPool handle (timing or not), 0 = no events
  uint32_t calib_gen = 0;  // GpuClock generation at launch
  uint32_t next = 0;       // completion thread's per-stream FIFO link (slot)
  int16_t device = -1;
  uint16_t stream = 0;
  uint16_t flags = 0;  // XPU_REC_* decided at launch
};

class PendingTable {
 public:
  void Init(uint32_t capacity);
  uint32_t capacity() const { return capacity_; }

  // Slots are 1-based so that OpHandle::slot == 0 means "not tracked".
  uint32_t Acquire() {
    uint32_t s = 0;
    return free_.TryPop(&s) ? s : 0;
  }
  void Release(uint32_t slot) { free_.TryPush(slot); }
  PendingOp& op(uint32_t slot) { return ops_[slot]; }
  bool Submit(uint32_t slot) { return submitted_.TryPush(slot); }
  bool PopSubmitted(uint32_t* slot) { return submitted_.TryPop(slot); }
  // Slots currently out of the free list (approximate, for the flush).
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  void AddInFlight(int d) { in_flight_.fetch_add(d, std::memory_order_relaxed); }

 private:
  uint32_t capacity_ = 0;
  std::unique_ptr<PendingOp[]> ops_;  // index 0 unused
  MpmcQueue free_;
  MpmcQueue submitted_;
  std::atomic<uint32_t> in_flight_{0};
};

// Sampling decision for the n-th (1-based) occurrence of a signature: the
// first `first`, then one in `every` (every == 0: none after the first).
inline bool SampleDecision(uint32_t n, uint32_t first, uint32_t every) {
  if (n <= first) return true;
  return every != 0 && (n - first) % every == 0;
}

// Per-signature occurrence counters, indexed by sig_id.
class Sampler {
 public:
  void Init(uint32_t sig_capacity);
  // Occurrence number (1-based) of `sig_id`, 0 if out of range.
  uint32_t Next(uint32_t sig_id) {
    return sig_id < capacity_ ? counts_[sig_id].fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  }

 private:
  uint32_t capacity_ = 0;
  std::unique_ptr<std::atomic<uint32_t>[]> counts_;
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_PENDING_TABLE_H_
