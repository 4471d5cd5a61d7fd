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
  // the GPU reaches it. Its GPU time lies after `before` (the record call
  // began) and before the first query that saw it done; when a query after
  // the call returned still saw it pending, after that query too (less the
  // small delay with which completion becomes visible to the host). Polling
  // keeps the bracket to a few microseconds, where a blocking synchronize
  // would add its wake-up; a wide bracket (a descheduled thread) is measured
  // again, a bounded number of times.
  constexpr int kMaxTries = 8;
  constexpr uint64_t kWideNs = 20 * 1000;
  constexpr uint64_t kPollLimitNs = 100 * 1000 * 1000;
  uint64_t lo = 0, hi = 0;
  for (int attempt = 0; attempt < kMaxTries; ++attempt) {
    const uint64_t before = NowNs();
    if (api_->event_record(ref, d.stream) != cudaSuccess) return false;
    lo = before;
    hi = 0;
    for (;;) {
      const cudaError_t q = api_->event_query(ref);
      const uint64_t t = NowNs();
      if (q == cudaSuccess) {
        hi = t;
        break;
      }
      if (q != cudaErrorNotReady) return false;
      lo = t;  // still pending here: the GPU time is later
      if (t - before > kPollLimitNs) {
        if (api_->event_synchronize(ref) != cudaSuccess) return false;
        hi = NowNs();
        break;
      }
    }
    if (hi - lo <= kWideNs) break;
  }
  const uint64_t ref_host = MidpointNs(lo, hi);
  // The GPU's timer and the host clock run at slightly different rates (tens
  // of ppm): over a re-calibration period that is tens of microseconds. The
  // rate is measured between consecutive references (GPU elapsed time
  // against host time) and applied when mapping.
  double rate = d.rate[gen & 1];
  if (gen != 0 && d.ref_host_ns[gen & 1] != 0 && ref_host > d.ref_host_ns[gen & 1]) {
    float ms = 0;
    if (api_->event_elapsed(&ms, d.ref[gen & 1], ref) == cudaSuccess) {
      rate = EstimateRate(ref_host - d.ref_host_ns[gen & 1], ms, rate);
    }
  }
  d.ref_host_ns[next & 1] = ref_host;
  d.rate[next & 1] = rate;
  d.calibrated_at_ns = hi;
  d.failed = false;
  d.generation.store(next, std::memory_order_release);
  return true;
}

double EstimateRate(uint64_t host_ns, double gpu_ms, double previous) {
  // Only over a long enough baseline (the brackets' microseconds must not
  // matter) and within 1000 ppm (anything else is a broken reference).
  if (!(previous > 0.999 && previous < 1.001)) previous = 1.0;
  const double gpu_ns = gpu_ms * 1e6;
  if (gpu_ns < 5e8) return previous;
  const double rate = static_cast<double>(host_ns) / gpu_ns;
  return rate > 0.999 && rate < 1.001 ? rate : previous;
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
  const double rate = d.rate[use & 1];
  *host_ns = OffsetByMs(d.ref_host_ns[use & 1], double{ms} * (rate > 0 ? rate : 1.0));
  return true;
}

void GpuClock::SetReferenceForTest(int device, cudaEvent_t ref, uint64_t ref_host_ns) {
  Device& d = dev_[device];
  uint32_t next = d.generation.load(std::memory_order_relaxed) + 1;
  d.ref[next & 1] = ref;
  d.ref_host_ns[next & 1] = ref_host_ns;
  d.rate[next & 1] = 1.0;
  d.generation.store(next, std::memory_order_release);
}

}  // namespace xpu::hook
