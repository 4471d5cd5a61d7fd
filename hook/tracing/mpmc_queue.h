// hook/tracing/mpmc_queue.h — bounded lock-free multi-producer multi-consumer
// queue of trivially copyable values (Vyukov's sequence-per-cell design).
// Used for the event pools' free lists (uint32_t) and the completion notices
// of the NCCL profiler plugin (completion_tracker.h).
//
// Thread-safety: TryPush/TryPop from any thread; Init once before use.
// No allocation after Init. TryPush fails only when the queue is really full
// (it waits out a concurrent pop that is half done); TryPop may report
// "empty" while a push is half done (the item shows up on the next call).
#ifndef XPU_HOOK_TRACING_MPMC_QUEUE_H_
#define XPU_HOOK_TRACING_MPMC_QUEUE_H_

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace xpu::hook {

template <typename T>
class MpmcQueueOf {
 public:
  // Capacity is rounded up to a power of two (>= 2).
  void Init(uint32_t capacity) {
    uint32_t n = 2;
    while (n < capacity) n <<= 1;
    mask_ = n - 1;
    cells_.reset(new Cell[n]);
    for (uint32_t i = 0; i < n; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }
  uint32_t capacity() const { return mask_ + 1; }

  bool TryPush(const T& v) {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    uint32_t spins = 0;
    for (;;) {
      Cell& c = cells_[pos & mask_];
      uint64_t seq = c.seq.load(std::memory_order_acquire);
      int64_t dif = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = v;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        // The cell still holds the previous lap's value. Either the queue is
        // full, or a consumer has claimed that value (moved head) and not
        // yet released the cell: a window of a few instructions. Only the
        // first is a real failure; callers that hold at most capacity()
        // items (free lists) must never lose one to the second.
        uint64_t head = head_.load(std::memory_order_acquire);
        if (head <= pos && pos - head >= mask_ + 1) return false;
        if (++spins > 64) sched_yield();  // the consumer was preempted mid-pop
        pos = tail_.load(std::memory_order_relaxed);
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  bool TryPop(T* v) {
    uint64_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      uint64_t seq = c.seq.load(std::memory_order_acquire);
      int64_t dif = static_cast<int64_t>(seq) - static_cast<int64_t>(pos + 1);
      if (dif == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *v = c.value;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (dif < 0) {
        return false;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};
    T value{};
  };
  std::unique_ptr<Cell[]> cells_;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

using MpmcQueue = MpmcQueueOf<uint32_t>;

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_MPMC_QUEUE_H_
