// hook/tracing/signatures.cc — see signatures.h.
#include "hook/tracing/signatures.h"

#include <cstring>

namespace xpu::hook {
namespace {

constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;

inline uint64_t Mix(uint64_t h, uint64_t w) {
  h ^= w;
  h *= kMul;
  return h ^ (h >> 29);
}

inline uint64_t Load64(const void* p) {
  uint64_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

uint64_t HashSignature(const xpu_signature_v1& sig, const char* name, size_t name_len) {
  // Identity fields only: bytes [4,8) (kind, dtype, gemm_flags), [16, 72)
  // (m..reserved0 region up to name), name_len and the name bytes.
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&sig);
  uint64_t h = 0x243f6a8885a308d3ull ^ name_len;
  uint32_t w4;
  memcpy(&w4, b + 4, 4);
  h = Mix(h, w4);
  h = Mix(h, Load64(&sig.m));  // m, n
  h = Mix(h, Load64(&sig.k));  // k, batch
  h = Mix(h, sig.count);
  h = Mix(h, sig.comm_id);
  h = Mix(h, Load64(&sig.comm_rank));  // comm_rank, comm_nranks
  h = Mix(h, Load64(&sig.peer));       // peer, device
  h = Mix(h, uint64_t{sig.out_dtype} | (uint64_t{sig.compute_type} << 8));
  size_t i = 0;
  for (; i + 8 <= name_len; i += 8) h = Mix(h, Load64(name + i));
  uint64_t tail = 0;
  if (i < name_len) {
    memcpy(&tail, name + i, name_len - i);
    h = Mix(h, tail ^ 0xff);
  }
  h = Mix(h, 0x5bd1e995);
  return h != 0 ? h : 1;
}

void SignatureTable::Init(RingWriter* ring) {
  ring_ = ring;
  capacity_ = ring->layout().sig_capacity;
  uint64_t n = 16;
  while (n < uint64_t{capacity_} * 2) n <<= 1;
  mask_ = n - 1;
  slots_.reset(new Slot[n]);
  kinds_.reset(new std::atomic<uint16_t>[capacity_]);
  for (uint32_t i = 0; i < capacity_; ++i) kinds_[i].store(0, std::memory_order_relaxed);
  next_id_.store(1, std::memory_order_relaxed);
}

uint32_t SignatureTable::WaitForId(const Slot& slot) {
  // The claimer is between its CAS and its publish: microseconds at most. The
  // bound keeps a claimer that was descheduled for long from stalling us.
  for (int i = 0; i < (1 << 20); ++i) {
    uint32_t id = slot.id.load(std::memory_order_acquire);
    if (id != 0) {
      if (id == kFailed) {
        ring_->Count(XPU_CNT_SIG_TABLE_FULL);
        return 0;
      }
      return id;
    }
    CpuRelax();
  }
  ring_->Count(XPU_CNT_INTERNAL);
  return 0;
}

uint32_t SignatureTable::Publish(const xpu_signature_v1& sig, const char* name, size_t name_len) {
  uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (id >= capacity_) return kFailed;
  xpu_signature_v1 e;
  memcpy(&e, &sig, sizeof(e));
  e.commit = 0;
  e.reserved0 = 0;
  e.reserved1 = 0;
  e.name_off = 0;
  uint32_t len32 = name_len > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(name_len);
  e.name_len = len32;
  memset(e.name, 0, sizeof(e.name));
  size_t inline_len = name_len < XPU_SIG_NAME_INLINE ? name_len : XPU_SIG_NAME_INLINE;
  if (inline_len > 0) memcpy(e.name, name, inline_len);
  if (name_len > XPU_SIG_NAME_INLINE) {
    uint32_t off = ring_->AppendString(name, name_len);
    if (off == UINT32_MAX) {
      // Arena full (counted): keep the inline prefix as the whole name.
      e.name_len = XPU_SIG_NAME_INLINE;
    } else {
      e.name_off = off;
    }
  }
  kinds_[id].store(sig.kind, std::memory_order_relaxed);
  ring_->PublishSignature(id, e);
  return id;
}

uint32_t SignatureTable::Intern(const xpu_signature_v1& sig, const char* name, size_t name_len) {
  if (slots_ == nullptr) return 0;
  if (name == nullptr) name_len = 0;
  const uint64_t h = HashSignature(sig, name, name_len);
  for (uint64_t probe = 0, i = h & mask_; probe <= mask_; ++probe, i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    uint64_t cur = s.hash.load(std::memory_order_acquire);
    if (cur == h) return WaitForId(s);
    if (cur != 0) continue;
    // Empty: claim it only while ids remain, so that a flood of new
    // signatures after the table is full does not fill the probe table.
    if (next_id_.load(std::memory_order_relaxed) >= capacity_) {
      ring_->Count(XPU_CNT_SIG_TABLE_FULL);
      return 0;
    }
    if (!s.hash.compare_exchange_strong(cur, h, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
      if (cur == h) return WaitForId(s);
      continue;  // another signature took this slot; keep probing
    }
    uint32_t id = Publish(sig, name, name_len);
    s.id.store(id, std::memory_order_release);
    if (id == kFailed) {
      ring_->Count(XPU_CNT_SIG_TABLE_FULL);
      return 0;
    }
    return id;
  }
  ring_->Count(XPU_CNT_SIG_TABLE_FULL);
  return 0;
}

}  // namespace xpu::hook
