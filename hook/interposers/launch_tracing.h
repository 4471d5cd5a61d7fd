// hook/interposers/launch_tracing.h — how the interposers trace a launch:
// TraceGpuCall around the real call, the plain-kernel launch tally and
// sampler, the per-kernel signature cache, the per-thread stream handle and
// the driver entry-point substitution. The signatures themselves are built
// with signature_fields.h.
//
// Everything here runs on the application's launch path, so it follows the
// rules of core_api.h: no allocation, lock, syscall, dlsym or logging. Name
// lookups (cudaFuncGetName and friends) happen once per kernel, at first
// sight, inside KernelSigCache::Lookup.
//
// Thread-safety: the launch tally is thread-local; KernelSigCache is a
// lock-free table safe to use from any thread; the rest is pure functions.
#ifndef XPU_HOOK_INTERPOSERS_LAUNCH_TRACING_H_
#define XPU_HOOK_INTERPOSERS_LAUNCH_TRACING_H_

#include <atomic>
#include <cstdint>

#include "hook/core_api.h"
#include "xpu/record.h"

namespace xpu::hook {

// Stream handle values with a special meaning in both the runtime and the
// driver API (cudaStreamPerThread == CU_STREAM_PER_THREAD).
inline constexpr uintptr_t kPerThreadStream = 0x2;

// The _ptsz entry points treat the null stream as the per-thread default
// stream. The core records its timing events on the stream we pass, so hand
// it the explicit per-thread handle, not the legacy null stream.
inline const void* PtszStream(const void* stream) {
  return stream ? stream : reinterpret_cast<const void*>(kPerThreadStream);
}

// ---------------------------------------------------------------------------
// Plain kernel launches: counted, not recorded, unless XPU_KERNEL_SAMPLE_EVERY
// asks for every Nth one. The tally is thread-local and trivially
// constructible (no TLS init guard on access) and is flushed into
// XPU_CNT_LAUNCHES_UNTRACED every kUntracedFlushEvery launches, so the common
// path is two increments and a compare. Up to kUntracedFlushEvery - 1 counts
// per thread are lost when a thread exits; the counter is a rate indicator,
// not an exact total.
struct LaunchTally {
  uint32_t untraced = 0;
  uint32_t since_sample = 0;
};
// initial-exec: the hook is preloaded, so its TLS is in the static block
// and access is a single %fs-relative load, not a __tls_get_addr call.
inline thread_local LaunchTally t_launch_tally __attribute__((tls_model("initial-exec")));
inline constexpr uint32_t kUntracedFlushEvery = 256;

inline void CountUntracedLaunch() {
  LaunchTally& t = t_launch_tally;
  if (++t.untraced >= kUntracedFlushEvery) {
    Count(XPU_CNT_LAUNCHES_UNTRACED, t.untraced);
    t.untraced = 0;
  }
}

// Decides whether this plain launch is traced. Counts it when it is not.
inline bool SamplePlainLaunch() {
  const uint32_t every = KernelSampleEvery();
  if (every != 0) {
    LaunchTally& t = t_launch_tally;
    if (++t.since_sample >= every) {
      t.since_sample = 0;
      return true;
    }
  }
  CountUntracedLaunch();
  return false;
}

// ---------------------------------------------------------------------------
// Kernel handle (host stub pointer, cudaKernel_t or CUfunction) -> sig_id.
// Open addressing with linear probing; entries are never removed (kernels
// live for the process in practice, and a stale entry only costs a slot).
// The thread that claims a slot names the kernel and publishes the sig_id
// with a release store; a concurrent first launch on another thread sees
// sig 0 and simply goes untraced once.
class KernelSigCache {
 public:
  static constexpr uint32_t kSlots = 4096;  // power of two
  static constexpr uint32_t kMaxProbe = 64;

  // Returns the sig_id for `key`, naming it on first sight with
  // `make_sig(key)` (which returns a sig_id, 0 on failure). Returns 0 when the
  // signature is not available (yet). When the table is full, falls back to
  // calling make_sig every time: only sampled launches get here.
  template <typename MakeSig>
  uint32_t Lookup(const void* key, MakeSig&& make_sig) {
    uint32_t i = Hash(key);
    for (uint32_t probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & (kSlots - 1)) {
      Slot& s = slots_[i];
      const void* k = s.key.load(std::memory_order_acquire);
      if (k == key) return s.sig.load(std::memory_order_acquire);
      if (k == nullptr) {
        const void* expected = nullptr;
        if (s.key.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) {
          const uint32_t sig = make_sig(key);
          s.sig.store(sig, std::memory_order_release);
          return sig;
        }
        if (expected == key) return s.sig.load(std::memory_order_acquire);
      }
    }
    return make_sig(key);
  }

 private:
  struct Slot {
    std::atomic<const void*> key{nullptr};
    std::atomic<uint32_t> sig{0};
  };
  static uint32_t Hash(const void* p) {
    uint64_t x = reinterpret_cast<uintptr_t>(p);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<uint32_t>(x) & (kSlots - 1);
  }
  Slot slots_[kSlots];
};

// Traces one asynchronous GPU op around `call` (which returns a status where
// 0 means success) and returns the call's status unchanged.
template <typename Call>
inline auto TraceGpuCall(uint32_t sig_id, const void* stream, uint32_t seq, uint16_t flags,
                         Call&& call) {
  const OpHandle op = BeginGpuOp(sig_id, stream, seq, flags);
  auto status = call();
  EndGpuOp(op, stream, static_cast<int>(status));
  return status;
}

// TraceGpuCall for the launches that carry a Python call site (cuBLAS and
// cuBLASLt GEMMs, NCCL collectives and p2p; record.h XPU_OP_PY_CALLSITE):
// when the sampler picked this occurrence, the calling thread's Python stack
// is linked to it. Captured after the real call returned and the end event
// was recorded, so that walking Python frames never lands between the
// timing events.
template <typename Call>
inline auto TraceGpuCallWithCallsite(uint32_t sig_id, const void* stream, uint32_t seq,
                                     uint16_t flags, Call&& call) {
  const OpHandle op = BeginGpuOp(sig_id, stream, seq, flags);
  auto status = call();
  EndGpuOp(op, stream, static_cast<int>(status));
  if (op.picked) EmitCallsiteLink(op, CapturePyCallsite());
  return status;
}

// Driver entry points handed out by cuGetProcAddress / cudaGetDriverEntryPoint
// (driver.cc): returns our wrapper for the launch entry points
// (remembering `real_fn` as the function the wrapper forwards to), else
// `real_fn` unchanged. `per_thread` selects the _ptsz flavour.
void* SubstituteDriverEntryPoint(const char* symbol, void* real_fn, bool per_thread);

}  // namespace xpu::hook

#endif  // XPU_HOOK_INTERPOSERS_LAUNCH_TRACING_H_
