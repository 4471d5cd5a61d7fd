// hook/tracing/op_lanes.cc — see op_lanes.h.
#include "hook/tracing/op_lanes.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace xpu::hook {
namespace {

// The calling thread's producer state. Trivially constructible (no TLS
// init guard); initial-exec, so access is one %fs-relative load. Keyed by
// the OpLanes instance so that a second instance (tests) never reuses it.
struct ProducerState {
  const OpLanes* owner;
  uint32_t lane;        // index + 1, 0 = none yet
  uint32_t retry_in;    // ops to wait before scanning for a free lane again
  uint64_t tail;        // == the lane's tail (we are its only writer)
  uint64_t head_cache;  // last head read from the consumer
};
__attribute__((tls_model("initial-exec"))) thread_local ProducerState t_producer;

constexpr uint32_t kRetryAfterNoLane = 4096;

}  // namespace

bool OpLanes::Init() {
  const size_t bytes = size_t{kMaxLanes} * kLaneCapacity * sizeof(LaneEntry);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return false;
  entries_ = static_cast<LaneEntry*>(p);
  return true;
}

uint32_t OpLanes::ThisThreadLane() {
  ProducerState& t = t_producer;
  if (t.owner == this && t.lane != 0) return t.lane;
  if (entries_ == nullptr) return 0;
  if (t.owner == this && t.retry_in != 0) {
    --t.retry_in;
    return 0;
  }
  // First traced op of this thread: one system call to name the owner.
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  for (uint32_t i = 0; i < kMaxLanes; ++i) {
    Lane& l = lanes_[i];
    pid_t expected = 0;
    if (l.owner.load(std::memory_order_relaxed) != 0) continue;
    if (!l.owner.compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) continue;
    t.owner = this;
    t.lane = i + 1;
    t.retry_in = 0;
    // A reclaimed lane keeps its indices: start where the last owner ended.
    t.tail = l.tail.load(std::memory_order_relaxed);
    t.head_cache = l.head.load(std::memory_order_acquire);
    uint32_t used = used_.load(std::memory_order_relaxed);
    while (used < i + 1 &&
           !used_.compare_exchange_weak(used, i + 1, std::memory_order_release,
                                        std::memory_order_relaxed)) {
    }
    return t.lane;
  }
  t.owner = this;
  t.lane = 0;
  t.retry_in = kRetryAfterNoLane;
  return 0;
}

uint32_t OpLanes::CurrentLane() const {
  const ProducerState& t = t_producer;
  return t.owner == this ? t.lane : 0;
}

bool OpLanes::AllDrained() const {
  const uint32_t n = lanes_used();
  for (uint32_t i = 0; i < n; ++i) {
    if (lanes_[i].head.load(std::memory_order_relaxed) !=
        lanes_[i].tail.load(std::memory_order_acquire)) {
      return false;
    }
  }
  return true;
}

bool OpLanes::Push(uint32_t lane, const LaneEntry& e) {
  ProducerState& t = t_producer;
  Lane& l = lanes_[lane - 1];
  const uint64_t tail = t.tail;
  if (tail - t.head_cache >= kLaneCapacity) {
    t.head_cache = l.head.load(std::memory_order_acquire);
    if (tail - t.head_cache >= kLaneCapacity) return false;
  }
  entries_[size_t{lane - 1} * kLaneCapacity + (tail & (kLaneCapacity - 1))] = e;
  t.tail = tail + 1;
  l.tail.store(tail + 1, std::memory_order_release);
  return true;
}

uint32_t OpLanes::Peek(uint32_t i, LaneEntry* out, uint32_t max) {
  Lane& l = lanes_[i];
  const uint64_t head = l.head.load(std::memory_order_relaxed);
  const uint64_t tail = l.tail.load(std::memory_order_acquire);
  uint32_t n = 0;
  for (uint64_t p = head; p < tail && n < max; ++p, ++n) {
    out[n] = entries_[size_t{i} * kLaneCapacity + (p & (kLaneCapacity - 1))];
  }
  return n;
}

void OpLanes::Consume(uint32_t i, uint32_t n) {
  Lane& l = lanes_[i];
  // Release: the producer may overwrite these slots once it sees the new head.
  l.head.store(l.head.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

uint32_t OpLanes::ReclaimDead(pid_t pid, uint64_t now_ns, uint64_t idle_ns) {
  uint32_t freed = 0;
  const uint32_t n = lanes_used();
  for (uint32_t i = 0; i < n; ++i) {
    Lane& l = lanes_[i];
    const pid_t tid = l.owner.load(std::memory_order_acquire);
    if (tid == 0) continue;
    const uint64_t tail = l.tail.load(std::memory_order_acquire);
    if (tail != l.seen_tail || l.idle_since_ns == 0) {
      l.seen_tail = tail;
      l.idle_since_ns = now_ns;
      continue;
    }
    if (now_ns - l.idle_since_ns < idle_ns) continue;
    if (l.head.load(std::memory_order_relaxed) != tail) continue;  // not drained yet
    l.idle_since_ns = now_ns;  // checked again only after another idle period
    if (syscall(SYS_tgkill, pid, tid, 0) == -1 && errno == ESRCH) {
      l.owner.store(0, std::memory_order_release);
      ++freed;
    }
  }
  return freed;
}

}  // namespace xpu::hook
