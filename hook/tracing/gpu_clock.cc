// hook/tracing/gpu_clock.cc — see gpu_clock.h. Background thread only, except
// NowNs.
#include "hook/tracing/gpu_clock.h"

#include <time.h>

#include <cmath>

#include "hook/core_api.h"

namespace xpu::hook {

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // vDSO: no syscall
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t OffsetByMs(uint64_t ref_host_ns, double elapsed_ms) {
  double delta = std::nearbyint(elapsed_ms * 1e6);
  if (delta < 0) {
    uint64_t d = static_cast<uint64_t>(-delta);
    return d > ref_host_ns ? 0 : ref_host_ns - d;
  }
  return ref_host_ns + static_cast<uint64_t>(delta);
}

void GpuClock::Init(const CudaApi* api, uint64_t recal_interval_ns) {
  api_ = api;
  recal_ns_ = recal_interval_ns;
}

bool GpuClock::Calibrate(int device) {
  if (api_ == nullptr || device < 0 || device >= kMaxDevices) return false;
  Device& d = dev_[device];
  if (d.stream == nullptr) {
    if (api_->stream_create(&d.stream, cudaStreamNonBlocking) != cudaSuccess) {
      d.stream = nullptr;
      d.failed = true;
      return false;
    }
    for (auto& ev : d.ref) {
      if (api_->event_create(&ev, cudaEventDefault) != cudaSuccess) {
        ev = nullptr;
        d.failed = true;
        return false;
      }
    }
  }
  uint32_t gen = d.generation.load(std::memory_order_relaxed);
  uint32_t next = gen + 1;
  cudaEvent_t ref = d.ref[next & 1];
  // The hook's stream is otherwise idle, so the event completes as soon as
  // the GPU reaches it; the host time around the wait brackets that instant,
  // and half the bracket is the mapping error. A wait that was descheduled
  // (a loaded host) widens it to milliseconds, so a wide bracket is measured
  // again, a bounded number of times; the last measurement is the one kept,
  // since the event holds only the last record.
  constexpr int kMaxTries = 8;
  constexpr uint64_t kWideNs = 200 * 1000;
  uint64_t before = 0, after = 0;
  for (int attempt = 0; attempt < kMaxTries; ++attempt) {
    before = NowNs();
    if (api_->event_record(ref, d.stream) != cudaSuccess ||
        api_->event_synchronize(ref) != cudaSuccess) {
      return false;
    }
    after = NowNs();
    if (after - before <= kWideNs) break;
  }
  d.ref_host_ns[next & 1] = MidpointNs(before, after);
  d.calibrated_at_ns = after;
  d.failed = false;
  d.generation.store(next, std::memory_order_release);
  return true;
}

void GpuClock::MaybeRecalibrate(uint64_t now_ns) {
  if (api_ == nullptr) return;
  for (int i = 0; i < kMaxDevices; ++i) {
    Device& d = dev_[i];
    if (d.generation.load(std::memory_order_relaxed) == 0 || d.stream == nullptr) continue;
    if (now_ns - d.calibrated_at_ns < recal_ns_) continue;
    if (api_->set_device(i) != cudaSuccess || !Calibrate(i)) {
      Count(XPU_CNT_CUDA_ERROR);
      d.calibrated_at_ns = now_ns;  // retry next interval, not every tick
    }
  }
}

bool GpuClock::MapGpuToHost(int device, uint32_t gen, cudaEvent_t event, uint64_t* host_ns) const {
  if (device < 0 || device >= kMaxDevices) return false;
  const Device& d = dev_[device];
  uint32_t cur = d.generation.load(std::memory_order_acquire);
  if (cur == 0) return false;
  // The op's own reference is still held only while at most one
  // re-calibration happened since its launch.
  uint32_t use = (gen != 0 && cur - gen <= 1) ? gen : cur;
  float ms = 0;
  if (api_ == nullptr || api_->event_elapsed(&ms, d.ref[use & 1], event) != cudaSuccess) {
    return false;
  }
  *host_ns = OffsetByMs(d.ref_host_ns[use & 1], ms);
  return true;
}

void GpuClock::SetReferenceForTest(int device, cudaEvent_t ref, uint64_t ref_host_ns) {
  Device& d = dev_[device];
  uint32_t next = d.generation.load(std::memory_order_relaxed) + 1;
  d.ref[next & 1] = ref;
  d.ref_host_ns[next & 1] = ref_host_ns;
  d.generation.store(next, std::memory_order_release);
}

}  // namespace xpu::hook
