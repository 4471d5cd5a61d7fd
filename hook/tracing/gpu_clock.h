// hook/tracing/gpu_clock.h — host clock and GPU-to-host time mapping.
//
// GPU events only give relative times (cudaEventElapsedTime, float ms). Per
// device, the background thread records a reference event on a hook-owned
// non-blocking stream and polls it, bracketing the instant the GPU reached it
// between host times a few microseconds apart: ref_host_ns = the bracket's
// midpoint. An event is then mapped as ref_host_ns + elapsed(ref, event) x
// rate, where rate (host ns per GPU ns, ~1 +- tens of ppm) is measured between
// consecutive references. Re-calibration every XPU_CLOCK_RECAL_S (default
// 5 s) keeps elapsed small enough for float ms to stay below a microsecond of
// error and follows host clock adjustments.
//
// Two references per device alternate; each op remembers the calibration
// generation current at its launch (Generation(), one relaxed load on the
// launch path), so ops recorded just before a re-calibration keep mapping
// against the reference that preceded them. Ops older than two generations
// map against the current one (negative elapsed, still correct).
//
// Thread-safety: Generation() from any thread; everything else on the
// background thread only.
#ifndef XPU_HOOK_TRACING_GPU_CLOCK_H_
#define XPU_HOOK_TRACING_GPU_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "hook/tracing/cuda_api.h"

namespace xpu::hook {

constexpr int kMaxDevices = 64;

// ref + round(elapsed_ms * 1e6), clamped at 0 (elapsed may be negative).
uint64_t OffsetByMs(uint64_t ref_host_ns, double elapsed_ms);
// Host ns per GPU ns, from `host_ns` of host time over `gpu_ms` of GPU time
// between two references; `previous` when the baseline is too short (under
// 0.5 s) or the result is off by more than 1000 ppm.
double EstimateRate(uint64_t host_ns, double gpu_ms, double previous);

// Midpoint of a host interval without overflow.
inline uint64_t MidpointNs(uint64_t before, uint64_t after) {
  return before + (after - before) / 2;
}

class GpuClock {
 public:
  void Init(const CudaApi* api, uint64_t recal_interval_ns);

  // Calibrates `device` now (background thread; the device must be current).
  // Returns false when the CUDA calls fail (counted by the caller).
  bool Calibrate(int device);
  // Re-calibrates every calibrated device whose reference is older than the
  // interval. Switches the current device of the calling thread.
  void MaybeRecalibrate(uint64_t now_ns);

  bool Calibrated(int device) const {
    return device >= 0 && device < kMaxDevices &&
           dev_[device].generation.load(std::memory_order_acquire) != 0;
  }
  // Calibration generation to store with an op at launch (0 = none yet).
  uint32_t Generation(int device) const {
    return (device >= 0 && device < kMaxDevices)
               ? dev_[device].generation.load(std::memory_order_relaxed)
               : 0;
  }

  // Host time of `event` (recorded on `device` at calibration generation
  // `gen`). False if uncalibrated or the elapsed query fails.
  bool MapGpuToHost(int device, uint32_t gen, cudaEvent_t event, uint64_t* host_ns) const;

  // The hook's own stream on `device` (null before its first calibration).
  // Background thread only.
  cudaStream_t Stream(int device) const {
    return device >= 0 && device < kMaxDevices ? dev_[device].stream : nullptr;
  }

  // Installs a reference without touching CUDA (tests).
  void SetReferenceForTest(int device, cudaEvent_t ref, uint64_t ref_host_ns);

 private:
  struct Device {
    cudaStream_t stream = nullptr;
    cudaEvent_t ref[2] = {nullptr, nullptr};
    uint64_t ref_host_ns[2] = {0, 0};
    double rate[2] = {1.0, 1.0};  // host ns per GPU ns since that reference
    uint64_t calibrated_at_ns = 0;
    bool failed = false;
    std::atomic<uint32_t> generation{0};  // ref[generation & 1] is current
  };

  const CudaApi* api_ = nullptr;
  uint64_t recal_ns_ = 5000000000ull;
  Device dev_[kMaxDevices];
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_GPU_CLOCK_H_
