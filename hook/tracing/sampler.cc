// hook/tracing/sampler.cc — see sampler.h. Init runs once, from InitRuntime,
// before any launch.
#include "hook/tracing/sampler.h"

namespace xpu::hook {

void Sampler::Init(uint32_t sig_capacity) {
  capacity_ = sig_capacity;
  counts_.reset(new std::atomic<uint32_t>[sig_capacity]);
  for (uint32_t i = 0; i < sig_capacity; ++i) counts_[i].store(0, std::memory_order_relaxed);
}

}  // namespace xpu::hook
