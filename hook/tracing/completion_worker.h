// hook/tracing/completion_worker.h — the hook's single background thread.
//
// It owns: taking traced ops from the launching threads' lanes and writing
// their final records once the GPU is known to have finished them
// (completion_tracker.h: completion markers, timed ops' end events, plugin
// notices and host syncs; queried with cuEventQuery, never a blocking
// synchronize on application work), the stream holds' timeout
// (stream_hold.h), the ring heartbeat (~10 Hz), event-pool creation for
// newly seen devices, clock re-calibration, resolving the CUDA runtime and
// driver, reclaiming the lanes of exited threads, the daemon client, and the
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
  uint32_t pending_count() const;

 private:
  static void* ThreadMain(void* self);
  void Run();
  void Housekeeping(uint64_t now_ns);
  void ServiceDevices();
  void RemeasureOverhead(uint64_t now_ns);

  Runtime* rt_ = nullptr;
  pthread_t thread_{};
  std::atomic<bool> running_{false};
  std::atomic<bool> flushed_{false};
  std::atomic<uint64_t> flush_deadline_ns_{0};

  bool driver_resolved_ = false;
  uint64_t next_reclaim_ns_ = 0;
  uint64_t next_overhead_ns_ = 0;
  uint64_t next_heartbeat_ns_ = 0;
  uint64_t next_resolve_ns_ = 0;
  uint64_t resolve_backoff_ns_ = 0;
  uint64_t next_daemon_ns_ = 0;
  uint64_t next_hang_check_ns_ = 0;  // hang_watch.h checks, ~10 Hz
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_COMPLETION_WORKER_H_
