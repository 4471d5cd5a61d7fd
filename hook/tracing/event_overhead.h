// hook/tracing/event_overhead.h — what a pair of timing events adds to the
// duration of the work between them, measured per device, so that the hook's
// event-timed durations match the kernel times a profiler (CUPTI) reports.
//
// A timing event is not free on the GPU: the start event's timestamp is taken
// before the next kernel has been dispatched, the end event's only after the
// kernel has drained. On an H100 that adds about 4 us to every event-timed
// op, whatever its length — 130 % of a 512^3 GEMM. The hook measures it: on
// its own stream it records [blocker][start event][span kernel][end event]
// (the blocker, a 50 us spin, keeps the GPU busy while the rest is enqueued,
// as a stream hold does for a timed op), where the
// span kernel (PTX, JIT-compiled by the driver) reads the GPU's %globaltimer
// when it starts and again when it is about to exit, spinning for a few
// microseconds in between. The kernel's own span is what a profiler would
// call its duration; the event pair's elapsed time minus that span is the
// overhead. Each measurement is the median of a batch of pairs; the lowest
// batch median seen is kept (contention with the application's kernels can
// only add), re-measured at every clock re-calibration. The completion thread subtracts it
// from every event-timed duration (and moves the start by half of it);
// XPU_TIMING_CORRECT=0 turns that off.
//
// Unavailable (no module loading, a PTX JIT failure, no mapped memory): the
// overhead is 0 and durations are the raw event pair.
//
// Thread-safety: Measure on the completion thread (the device current);
// OverheadNs from any thread (relaxed load).
#ifndef XPU_HOOK_TRACING_EVENT_OVERHEAD_H_
#define XPU_HOOK_TRACING_EVENT_OVERHEAD_H_

#include <atomic>
#include <cstdint>

#include "hook/tracing/cuda_api.h"
#include "hook/tracing/gpu_clock.h"

namespace xpu::hook {

class EventOverhead {
 public:
  void Init(const CudaApi* api) { api_ = api; }
  // Completion thread, `device` current: `reps` measurements on the hook's
  // own `stream`. Returns false when the calibration kernel is unavailable.
  bool Measure(int device, cudaStream_t stream, int reps);
  // Nanoseconds to subtract from an event-timed duration on `device` (0 =
  // not measured).
  uint64_t OverheadNs(int device) const {
    return device >= 0 && device < kMaxDevices ? dev_[device].overhead_ns.load(std::memory_order_relaxed)
                                               : 0;
  }
  // Tests.
  void SetForTest(int device, uint64_t ns) { dev_[device].overhead_ns.store(ns); }

 private:
  struct Device {
    std::atomic<uint64_t> overhead_ns{0};
    CUfunction span = nullptr;
    bool failed = false;
    volatile uint64_t* out = nullptr;  // mapped host memory: [start, end] globaltimer
    void* out_dev = nullptr;           // its device address
    cudaEvent_t ev[2] = {nullptr, nullptr};
  };
  bool Load(Device* d);

  const CudaApi* api_ = nullptr;
  Device dev_[kMaxDevices];
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_EVENT_OVERHEAD_H_
