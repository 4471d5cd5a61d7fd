// hook/interposers/comm_registry.cc — see comm_registry.h.
// Thread-safety: lock-free readers, writers serialised by CommRegistry::mu_.
#include "hook/interposers/comm_registry.h"

#include <cstring>
#include <new>

namespace xpu::hook {
namespace {

// FNV-1a over the bytes, then a splitmix64 finaliser so that ids that differ
// in few bits still spread over the whole 64-bit space.
uint64_t Finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;  // 0 means "unknown"
}

uint64_t Fnv(uint64_t h, const void* data, size_t len) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

// Domain tags keep ids of different derivations apart.
constexpr uint64_t kTagUniqueId = 1, kTagSplit = 2, kTagShrink = 3, kTagInitAll = 4;

uint64_t Start(uint64_t tag) { return Fnv(kFnvBasis, &tag, sizeof(tag)); }

}  // namespace

uint64_t CommIdFromUniqueId(const void* bytes, size_t len) {
  return Finalize(Fnv(Start(kTagUniqueId), bytes, bytes ? len : 0));
}

uint64_t CommIdFromSplit(uint64_t parent_id, int color, uint32_t split_ordinal) {
  uint64_t h = Start(kTagSplit);
  h = Fnv(h, &parent_id, sizeof(parent_id));
  h = Fnv(h, &color, sizeof(color));
  h = Fnv(h, &split_ordinal, sizeof(split_ordinal));
  return Finalize(h);
}

uint64_t CommIdFromShrink(uint64_t parent_id, uint32_t split_ordinal) {
  uint64_t h = Start(kTagShrink);
  h = Fnv(h, &parent_id, sizeof(parent_id));
  h = Fnv(h, &split_ordinal, sizeof(split_ordinal));
  return Finalize(h);
}

uint64_t CommIdFromInitAll(const int* devlist, int ndev, int pid) {
  uint64_t h = Start(kTagInitAll);
  h = Fnv(h, &ndev, sizeof(ndev));
  if (devlist != nullptr && ndev > 0) h = Fnv(h, devlist, sizeof(int) * static_cast<size_t>(ndev));
  h = Fnv(h, &pid, sizeof(pid));
  return Finalize(h);
}

CommInfo::CommInfo(const void* c, uint64_t id, int32_t r, int32_t n, int32_t dev)
    : comm(c),
      comm_id(id),
      rank(r),
      nranks(n),
      device(dev),
      p2p_peers(n > 0 && n <= CommRegistry::kMaxP2pPeers ? n : 0) {
  if (p2p_peers > 0) {
    p2p_seq.reset(new (std::nothrow) std::atomic<uint32_t>[2 * static_cast<size_t>(p2p_peers)]);
    if (p2p_seq) {
      for (int32_t i = 0; i < 2 * p2p_peers; ++i) p2p_seq[i].store(0, std::memory_order_relaxed);
    }
  }
}

CommRegistry::CommRegistry() {
  for (auto& s : slots_) s.store(nullptr, std::memory_order_relaxed);
}

CommRegistry& CommRegistry::Get() {
  // Leaked on purpose: NCCL calls made from atexit handlers or other static
  // destructors must still find a valid registry.
  static CommRegistry* registry = new CommRegistry();
  return *registry;
}

uint32_t CommRegistry::Hash(const void* p) {
  uint64_t x = reinterpret_cast<uintptr_t>(p);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x) & (kSlots - 1);
}

CommInfo* CommRegistry::Register(const void* comm, uint64_t comm_id, int32_t rank, int32_t nranks,
                                 int32_t device) {
  if (comm == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  // Find where the entry goes: the slot already holding this handle, else the
  // first retired slot on the probe chain, else the first empty one. Slots
  // never go back to empty, so probe chains of other handles stay intact.
  const uint32_t start = Hash(comm);
  int64_t same = -1, reusable = -1, empty = -1;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const uint32_t idx = (start + i) & (kSlots - 1);
    CommInfo* cur = slots_[idx].load(std::memory_order_relaxed);
    if (cur == nullptr) {
      empty = idx;
      break;
    }
    if (cur->comm == comm) {
      same = idx;
      break;
    }
    if (reusable < 0 && cur->retired.load(std::memory_order_relaxed)) reusable = idx;
  }
  const int64_t target = same >= 0 ? same : (reusable >= 0 ? reusable : empty);
  if (target < 0) return nullptr;
  std::unique_ptr<CommInfo> info(new (std::nothrow) CommInfo(comm, comm_id, rank, nranks, device));
  if (!info) return nullptr;
  CommInfo* raw = info.get();
  owned_.push_back(std::move(info));
  if (CommInfo* old = slots_[target].load(std::memory_order_relaxed)) {
    old->retired.store(true, std::memory_order_release);
  }
  slots_[target].store(raw, std::memory_order_release);
  return raw;
}

CommInfo* CommRegistry::Find(const void* comm) const {
  if (comm == nullptr) return nullptr;
  const uint32_t start = Hash(comm);
  for (uint32_t i = 0; i < kSlots; ++i) {
    CommInfo* cur = slots_[(start + i) & (kSlots - 1)].load(std::memory_order_acquire);
    if (cur == nullptr) return nullptr;
    if (cur->comm == comm) {
      return cur->retired.load(std::memory_order_acquire) ? nullptr : cur;
    }
  }
  return nullptr;
}

void CommRegistry::Retire(const void* comm) {
  std::lock_guard<std::mutex> lock(mu_);
  if (CommInfo* info = Find(comm)) info->retired.store(true, std::memory_order_release);
}

uint32_t CommRegistry::NextCollectiveSeq(CommInfo* info) {
  if (info == nullptr) return 0;
  return info->coll_seq.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint32_t CommRegistry::NextP2pSeq(CommInfo* info, int peer, bool send) {
  if (info == nullptr || !info->p2p_seq || peer < 0 || peer >= info->p2p_peers) return 0;
  const size_t idx = static_cast<size_t>(send ? peer : info->p2p_peers + peer);
  return info->p2p_seq[idx].fetch_add(1, std::memory_order_relaxed) + 1;
}

uint32_t CommRegistry::NextSplitOrdinal(CommInfo* info) {
  if (info == nullptr) return 0;
  return info->split_ordinal.fetch_add(1, std::memory_order_relaxed) + 1;
}

uint32_t CommRegistry::LastSeq(const void* comm) const {
  const CommInfo* info = Find(comm);
  return info ? info->coll_seq.load(std::memory_order_relaxed) : 0;
}

uint64_t CommRegistry::Id(const void* comm) const {
  const CommInfo* info = Find(comm);
  return info ? info->comm_id : 0;
}

uint32_t CommLastSeq(const void* comm) { return CommRegistry::Get().LastSeq(comm); }
uint64_t CommId(const void* comm) { return CommRegistry::Get().Id(comm); }

}  // namespace xpu::hook
