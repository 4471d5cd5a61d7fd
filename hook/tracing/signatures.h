// hook/tracing/signatures.h — interning of op signatures into sig_ids.
//
// A lock-free open-addressing table in process memory (preallocated at init,
// 2x the ring's signature capacity, power of two) maps a 64-bit hash of every
// signature field plus the name to its sig_id. Lookups are wait-free loads;
// the first occurrence claims a slot with one CAS, takes the next id, writes
// the entry into the ring file's signature table (commit last) and then
// publishes the id into the slot. A concurrent inserter of the same
// signature that loses the CAS spins (bounded) on the published id.
//
// Two different signatures with the same 64-bit hash would share an id; with
// a 64-bit mix hash and at most 2^20 signatures the odds are ~2^-25 per run,
// accepted to keep the lookup allocation- and compare-free.
//
// Thread-safety: Intern() and KindOf() from any thread; Init() once before.
#ifndef XPU_HOOK_TRACING_SIGNATURES_H_
#define XPU_HOOK_TRACING_SIGNATURES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "hook/ring/ring_writer.h"
#include "xpu/record.h"

namespace xpu::hook {

// Hash of the signature's identity fields and name (commit, name_off, the
// inline name and reserved bytes are ignored). Never 0.
uint64_t HashSignature(const xpu_signature_v1& sig, const char* name, size_t name_len);

class SignatureTable {
 public:
  SignatureTable() = default;
  SignatureTable(const SignatureTable&) = delete;
  SignatureTable& operator=(const SignatureTable&) = delete;

  // `ring` must outlive the table; ids range over [1, ring->layout().sig_capacity).
  void Init(RingWriter* ring);

  // Returns sig_id >= 1, or 0 when the table is full (XPU_CNT_SIG_TABLE_FULL)
  // or a concurrent publisher did not finish in time (XPU_CNT_INTERNAL).
  uint32_t Intern(const xpu_signature_v1& sig, const char* name, size_t name_len);

  // Op kind of a published id (XPU_OP_NONE if unknown). Lock-free.
  uint16_t KindOf(uint32_t id) const {
    return id < capacity_ ? kinds_[id].load(std::memory_order_relaxed) : 0;
  }
  uint32_t capacity() const { return capacity_; }
  uint32_t size() const { return next_id_.load(std::memory_order_relaxed) - 1; }

 private:
  // id values in a slot: 0 = claimed, not yet published; kFailed = could not
  // be published (table full); else the sig_id.
  static constexpr uint32_t kFailed = UINT32_MAX;
  struct Slot {
    std::atomic<uint64_t> hash{0};
    std::atomic<uint32_t> id{0};
  };

  uint32_t WaitForId(const Slot& slot);
  uint32_t Publish(const xpu_signature_v1& sig, const char* name, size_t name_len);

  RingWriter* ring_ = nullptr;
  uint32_t capacity_ = 0;  // ring sig_capacity
  uint64_t mask_ = 0;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<std::atomic<uint16_t>[]> kinds_;
  std::atomic<uint32_t> next_id_{1};
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_SIGNATURES_H_
