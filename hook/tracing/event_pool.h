// hook/tracing/event_pool.h — per-device pools of pre-created CUDA events.
//
// Creating an event costs a driver call with a lock inside; the launch path
// must not do it. Each device gets `per_device` timing events and as many
// cudaEventDisableTiming events, created by the background thread the first
// time the device is seen. Until then Take() requests creation and fails
// (the caller counts XPU_CNT_EVENT_POOL_EMPTY and skips tracking). The pool
// opens after a first chunk and grows chunk by chunk on later passes, so
// that the first ops of a run are not all lost to a long creation loop.
// Free lists are bounded lock-free queues of indices.
//
// Handles: 0 = no event; else 1 + (device << 17 | timing << 16 | index).
//
// Thread-safety: Take/Give/Get from any thread; ServiceRequests on the
// background thread only.
#ifndef XPU_HOOK_TRACING_EVENT_POOL_H_
#define XPU_HOOK_TRACING_EVENT_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "hook/tracing/cuda_api.h"
#include "hook/tracing/gpu_clock.h"
#include "hook/tracing/mpmc_queue.h"

namespace xpu::hook {

class EventPool {
 public:
  enum State : uint32_t { kNone = 0, kRequested = 1, kReady = 2, kFailed = 3 };

  // per_device <= 65536.
  void Init(const CudaApi* api, uint32_t per_device);

  // Launch path: a free event of the kind, or 0 (pool not ready / empty).
  uint32_t Take(int device, bool timing);
  void Give(uint32_t handle);
  cudaEvent_t Get(uint32_t handle) const;
  static int DeviceOf(uint32_t handle) { return static_cast<int>((handle - 1) >> 17); }

  State state(int device) const {
    return (device >= 0 && device < kMaxDevices)
               ? static_cast<State>(dev_[device].state.load(std::memory_order_acquire))
               : kFailed;
  }
  bool HasRequests() const {
    return requested_.load(std::memory_order_relaxed) != 0 ||
           growing_.load(std::memory_order_relaxed) != 0;
  }
  static constexpr uint32_t kChunk = 256;

  // Background thread: creates the pools of requested devices, calibrating
  // `clock` for each first (both need the device current), and grows pools
  // that are not full yet by one chunk. Returns the number of devices
  // serviced.
  int ServiceRequests(GpuClock* clock);

  // Marks `device` ready with events from `make` (tests: no CUDA).
  void InstallForTest(int device, cudaEvent_t (*make)(uint32_t index, bool timing));

 private:
  struct Device {
    std::atomic<uint32_t> state{kNone};
    std::unique_ptr<cudaEvent_t[]> events[2];  // [0] non-timing, [1] timing
    MpmcQueue free[2];
    uint32_t created[2] = {0, 0};  // background thread only
  };
  bool Create(int device);
  bool Grow(int device);  // one chunk more of each kind; false on CUDA failure

  const CudaApi* api_ = nullptr;
  uint32_t per_device_ = 0;
  std::atomic<uint64_t> requested_{0};  // bit per device
  std::atomic<uint64_t> growing_{0};    // bit per device whose pool is not full
  Device dev_[kMaxDevices];
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_EVENT_POOL_H_
