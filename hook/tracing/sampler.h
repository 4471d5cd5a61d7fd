// hook/tracing/sampler.h — which occurrences of a signature are timed: the
// first XPU_SAMPLE_FIRST, then one in XPU_SAMPLE_EVERY, counted per
// signature.
//
// Thread-safety: Next() from any thread (one relaxed fetch_add); Init once
// before use.
#ifndef XPU_HOOK_TRACING_SAMPLER_H_
#define XPU_HOOK_TRACING_SAMPLER_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace xpu::hook {

// Sampling decision for the n-th (1-based) occurrence of a signature: the
// first `first`, then one in `every` (every == 0: none after the first).
inline bool SampleDecision(uint32_t n, uint32_t first, uint32_t every) {
  if (n <= first) return true;
  return every != 0 && (n - first) % every == 0;
}

// Per-signature occurrence counters, indexed by sig_id.
class Sampler {
 public:
  void Init(uint32_t sig_capacity);
  // Occurrence number (1-based) of `sig_id`, 0 if out of range.
  uint32_t Next(uint32_t sig_id) {
    return sig_id < capacity_ ? counts_[sig_id].fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  }

 private:
  uint32_t capacity_ = 0;
  std::unique_ptr<std::atomic<uint32_t>[]> counts_;
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_SAMPLER_H_
