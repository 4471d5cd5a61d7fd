// hook/tracing/op_lanes.h — per-thread hand-off of traced ops from the
// launching threads to the completion thread.
//
// Each launching thread owns one lane: a single-producer single-consumer ring
// of 32-byte entries in process memory. The producer (the thread) writes an
// entry with plain stores and publishes it by a release store of `tail`; the
// consumer (the completion thread) copies published entries out and
// release-stores `head`. No read-modify-write instruction on the launch path,
// and the cache lines of an entry move to the consumer once, in a batch:
// this replaces a lock-free MPMC queue whose two CAS per op contended with the
// consumer.
//
// A thread claims a free lane at its first traced op (one CAS, and one
// gettid() system call per thread lifetime, to name the owner). Lanes are
// never returned by their owner: the consumer reclaims the lane of a thread
// that has exited (tgkill(pid, tid, 0) fails with ESRCH, checked only for
// lanes idle for a second, from the completion thread) once it is drained.
// A reused tid makes a dead thread's lane look alive: it stays claimed until
// that tid exits too (bounded leak of one lane).
//
// Entries are program-ordered per thread. The consumer relies on that:
// an op's marker event completes every earlier op of the same thread on the
// same stream (stream order), and a sync entry completes every earlier op of
// the same thread on the synchronized stream(s).
//
// Memory: kMaxLanes lanes of kLaneCapacity entries, reserved with
// mmap(MAP_NORESERVE) at Init (pages are backed when first written).
// When every lane is taken or a lane is full, the caller falls back to a
// host-side record (XPU_CNT_PENDING_FULL).
//
// Thread-safety: Producer() from any thread, for the calling thread only;
// the Consumer side from the completion thread only (or a test playing it).
#ifndef XPU_HOOK_TRACING_OP_LANES_H_
#define XPU_HOOK_TRACING_OP_LANES_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace xpu::hook {

// One traced op (or a host-side completion fact) as handed to the consumer.
struct LaneEntry {
  enum Type : uint8_t {
    kOp = 1,          // a launched op
    kStreamSync = 2,  // every earlier op of this thread on `stream` is complete
    kAllSync = 3,     // every earlier op of this thread on `device` (-1: any) is complete
  };
  uint64_t launch_ns;  // kOp: CPU launch; syncs: host time the sync returned
  uint32_t sig_id;
  uint32_t seq;
  uint32_t ev_start;  // EventPool handle of the timing start event, 0 = untimed
  uint32_t ev_end;    // EventPool handle of the end / marker event, 0 = none
  uint16_t stream;    // interned stream index
  uint16_t flags;     // XPU_REC_* decided at launch
  uint8_t type;
  int8_t device;       // -1 = not known (no event was recorded)
  uint16_t calib_gen;  // low 16 bits of the GpuClock generation at launch
};
static_assert(sizeof(LaneEntry) == 32, "lane entries are 32 bytes");

class OpLanes {
 public:
  static constexpr uint32_t kMaxLanes = 256;
  static constexpr uint32_t kLaneCapacity = 4096;  // power of two

  struct alignas(64) Lane {
    std::atomic<pid_t> owner{0};  // tid of the producer, 0 = free
    std::atomic<uint64_t> tail{0};
    alignas(64) std::atomic<uint64_t> head{0};  // consumer-owned
    uint64_t idle_since_ns = 0;                 // consumer-owned
    uint64_t seen_tail = 0;                     // consumer-owned
  };

  // Reserves the lanes. False when the memory cannot be reserved (every op
  // then falls back to host-side records).
  bool Init();
  bool ready() const { return entries_ != nullptr; }

  // ---- producer (launching thread) ----
  // The calling thread's lane index + 1, claiming one on first use; 0 when
  // none is free (counted by the caller).
  uint32_t ThisThreadLane();
  // The calling thread's lane index + 1 if it has one; never claims.
  uint32_t CurrentLane() const;
  // Appends `e` to the calling thread's lane `lane` (from ThisThreadLane) and
  // publishes it. False when the lane is full.
  bool Push(uint32_t lane, const LaneEntry& e);

  // ---- consumer (completion thread) ----
  // Copies up to `max` published entries of lane `i` (0-based) into `out`
  // without consuming them; returns how many.
  uint32_t Peek(uint32_t i, LaneEntry* out, uint32_t max);
  // Consumes `n` entries of lane `i` (after Peek).
  void Consume(uint32_t i, uint32_t n);
  // True when every published entry has been consumed.
  bool AllDrained() const;
  // Highest lane index ever claimed + 1.
  uint32_t lanes_used() const { return used_.load(std::memory_order_acquire); }
  // Frees lanes whose owner thread has exited and that are drained. Checks
  // lanes idle for `idle_ns`; makes one system call per such lane.
  uint32_t ReclaimDead(pid_t pid, uint64_t now_ns, uint64_t idle_ns);
  pid_t owner(uint32_t i) const { return lanes_[i].owner.load(std::memory_order_relaxed); }

 private:
  LaneEntry* entries_ = nullptr;  // kMaxLanes * kLaneCapacity
  Lane lanes_[kMaxLanes];
  std::atomic<uint32_t> used_{0};
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_OP_LANES_H_
