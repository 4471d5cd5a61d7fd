// hook/ring/ring_reader_for_test.h — a minimal consumer of the ring for the
// hook's unit tests, following the reading rules of include/xpu/ring.h.
// Test-only. Thread-safety: one reader per ring.
#ifndef XPU_HOOK_RING_RING_READER_FOR_TEST_H_
#define XPU_HOOK_RING_RING_READER_FOR_TEST_H_

#include <cstdint>
#include <cstring>

#include "xpu/ring.h"

namespace xpu::hook::testing {

class TestRingReader {
 public:
  enum class Result { kRecord, kEmpty, kInFlight, kLapped };

  TestRingReader(xpu_ring_header_v1* h, xpu_record_v1* slots)
      : h_(h), slots_(slots), pos_(__atomic_load_n(&h->read_index, __ATOMIC_ACQUIRE)) {}

  Result Next(xpu_record_v1* out) {
    uint64_t w = __atomic_load_n(&h_->write_index, __ATOMIC_ACQUIRE);
    if (pos_ >= w) return Result::kEmpty;
    const xpu_record_v1* s = &slots_[pos_ & (h_->ring_capacity - 1)];
    const uint32_t want = static_cast<uint32_t>(pos_ + 1);
    uint32_t c = __atomic_load_n(&s->commit, __ATOMIC_ACQUIRE);
    if (c != want) {
      // Ahead of us by whole laps: the producer overwrote our position.
      return (c != 0 && static_cast<int32_t>(c - want) > 0) ? Result::kLapped : Result::kInFlight;
    }
    memcpy(out, s, sizeof(*out));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->commit, __ATOMIC_RELAXED) != want) return Result::kLapped;
    ++pos_;
    __atomic_store_n(&h_->read_index, pos_, __ATOMIC_RELEASE);
    return Result::kRecord;
  }
  uint64_t position() const { return pos_; }
  void set_position(uint64_t p) { pos_ = p; }

 private:
  xpu_ring_header_v1* h_;
  xpu_record_v1* slots_;
  uint64_t pos_;
};

}  // namespace xpu::hook::testing

#endif  // XPU_HOOK_RING_RING_READER_FOR_TEST_H_
