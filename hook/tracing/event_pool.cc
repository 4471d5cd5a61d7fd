// hook/tracing/event_pool.cc — see event_pool.h.
#include "hook/tracing/event_pool.h"

#include <algorithm>

#include "hook/core_api.h"

namespace xpu::hook {

void EventPool::Init(const CudaApi* api, uint32_t per_device) {
  api_ = api;
  per_device_ = per_device > 65536 ? 65536 : per_device;
}

uint32_t EventPool::Take(int device, bool timing) {
  if (device < 0 || device >= kMaxDevices) return 0;
  Device& d = dev_[device];
  uint32_t s = d.state.load(std::memory_order_acquire);
  if (s != kReady) {
    if (s == kNone) {
      uint32_t expected = kNone;
      if (d.state.compare_exchange_strong(expected, kRequested, std::memory_order_relaxed)) {
        requested_.fetch_or(1ull << device, std::memory_order_release);
      }
    }
    return 0;
  }
  uint32_t idx = 0;
  if (!d.free[timing].TryPop(&idx)) return 0;
  return 1 + ((static_cast<uint32_t>(device) << 17) | (uint32_t{timing} << 16) | idx);
}

void EventPool::Give(uint32_t handle) {
  if (handle == 0) return;
  uint32_t h = handle - 1;
  Device& d = dev_[h >> 17];
  // Cannot fail: the queue holds every index of the pool.
  d.free[(h >> 16) & 1].TryPush(h & 0xffff);
}

cudaEvent_t EventPool::Get(uint32_t handle) const {
  uint32_t h = handle - 1;
  return dev_[h >> 17].events[(h >> 16) & 1][h & 0xffff];
}

bool EventPool::Create(int device) {
  Device& d = dev_[device];
  for (int kind = 0; kind < 2; ++kind) {
    // The handle array is sized once: Get() may index it from any thread
    // while later chunks are still being created.
    d.events[kind].reset(new cudaEvent_t[per_device_]());
    d.free[kind].Init(per_device_);
    d.created[kind] = 0;
  }
  return Grow(device);
}

bool EventPool::Grow(int device) {
  Device& d = dev_[device];
  bool full = true;
  for (int kind = 0; kind < 2; ++kind) {
    unsigned flags = kind == 1 ? cudaEventDefault : cudaEventDisableTiming;
    uint32_t end = std::min(per_device_, d.created[kind] + kChunk);
    for (uint32_t i = d.created[kind]; i < end; ++i) {
      if (api_->event_create(&d.events[kind][i], flags) != cudaSuccess) return false;
      d.free[kind].TryPush(i);  // release: publishes the handle written above
      d.created[kind] = i + 1;
    }
    full = full && d.created[kind] == per_device_;
  }
  if (full) {
    growing_.fetch_and(~(1ull << device), std::memory_order_relaxed);
  } else {
    growing_.fetch_or(1ull << device, std::memory_order_relaxed);
  }
  return true;
}

int EventPool::ServiceRequests(GpuClock* clock) {
  uint64_t req = requested_.exchange(0, std::memory_order_acquire);
  const uint64_t created_now = req;  // these grow from the next pass on
  int n = 0;
  for (int dev = 0; req != 0 && dev < kMaxDevices; ++dev) {
    if ((req & (1ull << dev)) == 0) continue;
    req &= ~(1ull << dev);
    ++n;
    bool ok = api_ != nullptr && api_->Complete() && api_->set_device(dev) == cudaSuccess &&
              clock->Calibrate(dev) && Create(dev);
    if (!ok) Count(XPU_CNT_CUDA_ERROR);
    // A failed device stays failed: retrying per launch would hammer a
    // broken driver; its ops are counted as untracked.
    dev_[dev].state.store(ok ? kReady : kFailed, std::memory_order_release);
  }
  uint64_t grow = growing_.load(std::memory_order_relaxed) & ~created_now;
  for (int dev = 0; grow != 0 && dev < kMaxDevices; ++dev) {
    if ((grow & (1ull << dev)) == 0 || dev_[dev].state.load(std::memory_order_relaxed) != kReady) {
      continue;
    }
    grow &= ~(1ull << dev);
    ++n;
    // A failed chunk keeps what exists: a smaller pool still works.
    if (api_->set_device(dev) != cudaSuccess || !Grow(dev)) {
      Count(XPU_CNT_CUDA_ERROR);
      growing_.fetch_and(~(1ull << dev), std::memory_order_relaxed);
    }
  }
  return n;
}

void EventPool::InstallForTest(int device, cudaEvent_t (*make)(uint32_t, bool)) {
  Device& d = dev_[device];
  for (int kind = 0; kind < 2; ++kind) {
    d.events[kind].reset(new cudaEvent_t[per_device_]());
    d.free[kind].Init(per_device_);
    for (uint32_t i = 0; i < per_device_; ++i) {
      d.events[kind][i] = make(i, kind == 1);
      d.free[kind].TryPush(i);
    }
  }
  d.state.store(kReady, std::memory_order_release);
}

}  // namespace xpu::hook
