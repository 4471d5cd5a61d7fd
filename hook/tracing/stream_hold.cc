// hook/tracing/stream_hold.cc — see stream_hold.h.
#include "hook/tracing/stream_hold.h"

namespace xpu::hook {
namespace {

// Cyclic "a is after b" for 32-bit flag values (the wait's comparison).
inline bool After(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

}  // namespace

void StreamHolds::Init(const CudaApi* api, bool enabled, uint64_t timeout_ns) {
  api_ = api;
  enabled_ = enabled;
  timeout_ns_ = timeout_ns;
}

bool StreamHolds::SetUp(int device) {
  if (!enabled_ || device < 0 || device >= kMaxDevices) return false;
  const uint64_t bit = 1ull << device;
  if ((ready_.load(std::memory_order_relaxed) & bit) != 0) return true;
  if ((failed_.load(std::memory_order_relaxed) & bit) != 0) return false;
  bool ok = api_ != nullptr && api_->CanHold();
  if (ok && flags_ == nullptr) {
    void* p = nullptr;
    // Portable: one allocation serves every device's context.
    ok = api_->host_alloc(&p, kSlots * sizeof(uint32_t),
                          cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess;
    if (ok) {
      flags_ = static_cast<uint32_t*>(p);
      for (uint32_t i = 0; i < kSlots; ++i) flags_[i] = 0;
    }
  }
  void* d = nullptr;
  ok = ok && api_->host_get_device_pointer(&d, flags_, 0) == cudaSuccess;
  cudaStream_t probe = nullptr;
  if (ok) ok = api_->stream_create(&probe, cudaStreamNonBlocking) == cudaSuccess;
  if (ok) {
    // A wait that is already satisfied: does this device take stream
    // memory operations at all?
    auto wait = api_->cu_stream_wait_value32.load(std::memory_order_relaxed);
    ok = wait(reinterpret_cast<CUstream>(probe), reinterpret_cast<CUdeviceptr>(d), 0,
              CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS;
    // The probe stream is kept: destroying it is not worth a code path.
  }
  if (!ok) {
    failed_.fetch_or(bit, std::memory_order_relaxed);
    return false;
  }
  dptr_[device] = reinterpret_cast<uint64_t>(d);
  ready_.fetch_or(bit, std::memory_order_release);
  return true;
}

void StreamHolds::SetUpForTest(int device, uint32_t* flags) {
  flags_ = flags;
  enabled_ = true;
  dptr_[device] = reinterpret_cast<uint64_t>(flags);
  ready_.fetch_or(1ull << device, std::memory_order_release);
}

uint32_t StreamHolds::Arm(int device, const void* stream, uint64_t now_ns) {
  if (!Ready(device)) return 0;
  auto wait = api_->cu_stream_wait_value32.load(std::memory_order_relaxed);
  if (wait == nullptr) return 0;
  const uint32_t slot = cursor_.fetch_add(1, std::memory_order_relaxed) & (kSlots - 1);
  const uint32_t target = __atomic_load_n(&flags_[slot], __ATOMIC_RELAXED) + 1;
  target_[slot].store(target, std::memory_order_relaxed);
  armed_ns_[slot].store(now_ns != 0 ? now_ns : 1, std::memory_order_release);
  CUstream s = const_cast<CUstream>(static_cast<const CUstream_st*>(stream));
  if (wait(s, dptr_[device] + slot * sizeof(uint32_t), target, CU_STREAM_WAIT_VALUE_GEQ) !=
      CUDA_SUCCESS) {
    armed_ns_[slot].store(0, std::memory_order_relaxed);
    return 0;
  }
  return slot + 1;
}

void StreamHolds::Release(uint32_t handle) {
  if (handle == 0 || flags_ == nullptr) return;
  const uint32_t slot = (handle - 1) & (kSlots - 1);
  const uint32_t target = target_[slot].load(std::memory_order_relaxed);
  // Raise the flag to `target` unless it is already there or beyond.
  uint32_t cur = __atomic_load_n(&flags_[slot], __ATOMIC_RELAXED);
  while (After(target, cur) &&
         !__atomic_compare_exchange_n(&flags_[slot], &cur, target, true, __ATOMIC_RELEASE,
                                      __ATOMIC_RELAXED)) {
  }
  armed_ns_[slot].store(0, std::memory_order_relaxed);
}

uint32_t StreamHolds::ReleaseExpired(uint64_t now_ns) {
  if (flags_ == nullptr || now_ns < next_scan_ns_) return 0;
  next_scan_ns_ = now_ns + timeout_ns_ / 4;
  uint32_t n = 0;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const uint64_t t = armed_ns_[i].load(std::memory_order_acquire);
    if (t != 0 && now_ns > t && now_ns - t >= timeout_ns_) {
      Release(i + 1);
      ++n;
    }
  }
  return n;
}

}  // namespace xpu::hook
