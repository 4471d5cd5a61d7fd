// hook/process/runtime.h — the hook's process-wide state, built once by
// InitRuntime (library constructor, or a test) and never destroyed: threads
// that are still running at exit (the completion thread, an application thread
// in a late launch) must never see it torn down.
//
// Thread-safety: GetRuntime() is one acquire load; the Runtime's members
// document their own rules. Fields set during InitRuntime are immutable.
#ifndef XPU_HOOK_PROCESS_RUNTIME_H_
#define XPU_HOOK_PROCESS_RUNTIME_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "hook/process/config.h"
#include "hook/process/daemon_client.h"
#include "hook/ring/ring_writer.h"
#include "hook/tracing/completion_tracker.h"
#include "hook/tracing/completion_worker.h"
#include "hook/tracing/cuda_api.h"
#include "hook/tracing/event_overhead.h"
#include "hook/tracing/event_pool.h"
#include "hook/tracing/gpu_clock.h"
#include "hook/tracing/op_lanes.h"
#include "hook/tracing/sampler.h"
#include "hook/tracing/signatures.h"
#include "hook/tracing/stream_hold.h"

namespace xpu::hook {

constexpr uint32_t kMaxStreams = 65536;

struct Runtime {
  Config config;
  pid_t pid = 0;
  RingWriter ring;
  SignatureTable sigs;
  CudaApi cuda;
  std::atomic<bool> cuda_ready{false};  // `cuda` resolved and complete
  GpuClock clock;
  EventPool pool;
  EventOverhead overhead;  // event-pair overhead per device (event_overhead.h)
  StreamHolds holds;
  OpLanes lanes;              // launching threads -> completion thread
  CompletionTracker tracker;  // completion thread (PushNotice: any thread)
  uint64_t marker_ns = 0;     // XPU_MARKER_US in ns
  Sampler sampler;
  std::unique_ptr<std::atomic<uint32_t>[]> stream_seq;  // per StreamIndex launch count
  CompletionWorker worker;
  DaemonClient daemon;
};

// nullptr until InitRuntime succeeded.
Runtime* GetRuntime();

// Builds the runtime from `config` (creates and formats the ring). Safe to
// call once per process; a second call returns false. No CUDA, no threads.
bool InitRuntime(const Config& config, pid_t pid, std::string* error);

// Flushes pending ops (waiting up to `flush_timeout_ns` for the GPU, then
// writing the rest as XPU_REC_INCOMPLETE) and marks the producer EXITED.
// Only the process that created the ring does anything.
void ShutdownRuntime(uint64_t flush_timeout_ns);

// Fork child: stops producing (process-local; the parent's shared header is
// not touched, the child shares its mapping).
void DisableInForkedChild();

// Host events flow unless disabled (they ignore XPU_TIMING=off).
bool HostActive();
// xpu_set_enabled: returns the previous state.
bool SetEnabled(bool enabled);

// Tests that play the background thread themselves (calling
// CompletionWorker::PollOnce) keep EnsureStarted from starting the real one.
void MarkStartedForTest();

// EmitHostInterval that reports whether the record was written (false:
// inactive, or dropped and counted).
bool EmitHostRecord(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                    uint16_t flags);

// Writes one record (the ring fills in commit). False if dropped (counted)
// or no runtime.
bool WriteRecord(const xpu_record_v1& rec);

}  // namespace xpu::hook

#endif  // XPU_HOOK_PROCESS_RUNTIME_H_
