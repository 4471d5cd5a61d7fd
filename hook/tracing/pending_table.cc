// hook/tracing/pending_table.cc — see pending_table.h. Init runs once, from
// InitRuntime, before any launch.
#include "hook/tracing/pending_table.h"

namespace xpu::hook {

void PendingTable::Init(uint32_t capacity) {
  capacity_ = capacity;
  ops_.reset(new PendingOp[capacity + 1]);
  free_.Init(capacity);
  submitted_.Init(capacity);
  for (uint32_t s = 1; s <= capacity; ++s) free_.TryPush(s);
}

void Sampler::Init(uint32_t sig_capacity) {
  capacity_ = sig_capacity;
  counts_.reset(new std::atomic<uint32_t>[sig_capacity]);
  for (uint32_t i = 0; i < sig_capacity; ++i) counts_[i].store(0, std::memory_order_relaxed);
}

}  // namespace xpu::hook
