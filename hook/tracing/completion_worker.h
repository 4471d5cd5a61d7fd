// hook/tracing/completion_worker.h — the hook's single background thread.
//
// It owns: completion polling of pending GPU ops (cudaEventQuery, never a
// blocking synchronize on application events, FIFO per stream because ops on
// one stream complete in order), writing their final records, the ring
// heartbeat (~10 Hz), event-pool creation for newly seen devices, clock
// re-calibration, resolving the CUDA runtime, the daemon client, and the
// profiling windows the daemon asks for (cupti_window.h).
//
// Polling is adaptive: a short busy phase while ops are pending, then
// 100 us sleeps; 500 us sleeps when idle, so an idle process pays ~nothing.
//
// Thread-safety: Start/RequestFlush/flushed/running from any thread; all
// other members are touched by the background thread only (PollOnce is
// public for tests, which then play the background thread).
#ifndef XPU_HOOK_TRACING_COMPLETION_WORKER_H_
#define XPU_HOOK_TRACING_COMPLETION_WORKER_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace xpu::hook {

struct Runtime;

class CompletionWorker {
 public:
  void Init(Runtime* rt);
  // Creates the thread (signals blocked in it). False if pthread_create failed.
  bool Start();
  bool running() const { return running_.load(std::memory_order_acquire); }

  // Asks the thread to finish: poll until `deadline_ns` or nothing pending,
  // then write what is left as XPU_REC_INCOMPLETE and stop.
  void RequestFlush(uint64_t deadline_ns) {
    flush_deadline_ns_.store(deadline_ns, std::memory_order_release);
  }
  bool flushed() const { return flushed_.load(std::memory_order_acquire); }

  // One polling pass: takes submitted ops, completes what the GPU finished.
  // Returns the number of records written.
  int PollOnce(uint64_t now_ns);
  // Writes every op still pending as XPU_REC_INCOMPLETE.
  int FlushIncomplete(uint64_t now_ns);
  uint32_t pending_count() const { return pending_count_; }

 private:
  static void* ThreadMain(void* self);
  void Run();
  void Housekeeping(uint64_t now_ns);
  void DrainSubmitted();
  // Writes the final record of `slot` and returns it to the free list.
  void Complete(uint32_t slot, uint64_t now_ns);
  void Abandon(uint32_t slot, uint64_t now_ns, uint16_t flags);

  Runtime* rt_ = nullptr;
  pthread_t thread_{};
  std::atomic<bool> running_{false};
  std::atomic<bool> flushed_{false};
  std::atomic<uint64_t> flush_deadline_ns_{0};

  // Per-stream FIFO of slots (intrusive through PendingOp::next), and the
  // dense list of streams that have pending ops.
  std::unique_ptr<uint32_t[]> head_;
  std::unique_ptr<uint32_t[]> tail_;
  std::unique_ptr<uint16_t[]> active_;
  uint32_t active_count_ = 0;
  uint32_t pending_count_ = 0;

  uint64_t next_heartbeat_ns_ = 0;
  uint64_t next_resolve_ns_ = 0;
  uint64_t resolve_backoff_ns_ = 0;
  uint64_t next_daemon_ns_ = 0;
  uint64_t next_hang_check_ns_ = 0;  // hang_watch.h checks, ~10 Hz
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_COMPLETION_WORKER_H_
