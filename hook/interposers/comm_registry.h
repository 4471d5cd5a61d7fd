// hook/interposers/comm_registry.h — what the hook knows about each NCCL
// communicator: its cluster-wide identity (comm_id), rank, size, device, and
// the sequence counters that let every member number the same collective the
// same way.
//
// comm_id is derived without talking to the other members, from inputs that
// every member passes identically:
//   ncclCommInitRank / InitRankConfig / InitRankScalable: the ncclUniqueId
//       bytes (for Scalable, the first of the ids);
//   ncclCommSplit: (parent comm_id, color, per-parent split ordinal) — split
//       is collective over the parent, so each member counts the same
//       ordinal; ncclCommShrink uses the same ordinal with a distinct tag;
//   ncclCommInitAll: (devlist, ndev, pid) — all members are in this process.
// 0 is reserved for "unknown".
//
// Sequence numbers (record.seq): collectives are numbered per communicator,
// 1-based, in issue order; point-to-point ops per (communicator, peer,
// direction), so that rank a's n-th send to b and rank b's n-th receive from
// a carry the same number.
//
// Thread-safety: Find/NextCollectiveSeq/NextP2pSeq/LastSeq are lock-free and
// safe from any thread (the launch path). Register and Retire take a mutex
// (communicator creation and destruction are not on the launch path).
// CommInfo objects are never freed while the process runs — a reader may
// still hold one after Retire — so a retired entry costs its memory until
// exit; communicators are created a handful of times per job.
#ifndef XPU_HOOK_INTERPOSERS_COMM_REGISTRY_H_
#define XPU_HOOK_INTERPOSERS_COMM_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace xpu::hook {

// Identity helpers (pure functions; never return 0).
uint64_t CommIdFromUniqueId(const void* bytes, size_t len);
uint64_t CommIdFromSplit(uint64_t parent_id, int color, uint32_t split_ordinal);
uint64_t CommIdFromShrink(uint64_t parent_id, uint32_t split_ordinal);
uint64_t CommIdFromInitAll(const int* devlist, int ndev, int pid);

struct CommInfo {
  CommInfo(const void* c, uint64_t id, int32_t r, int32_t n, int32_t dev);
  CommInfo(const CommInfo&) = delete;
  CommInfo& operator=(const CommInfo&) = delete;

  const void* const comm;
  const uint64_t comm_id;
  // Filled lazily when unknown at creation (non-blocking init): written with
  // relaxed stores by any thread, always to the same value.
  std::atomic<int32_t> rank;
  std::atomic<int32_t> nranks;
  std::atomic<int32_t> device;
  std::atomic<bool> retired{false};
  std::atomic<uint32_t> coll_seq{0};       // last collective seq issued
  std::atomic<uint32_t> split_ordinal{0};  // splits/shrinks issued on this comm
  // 2 * p2p_peers counters: [peer] sends, [p2p_peers + peer] receives.
  const int32_t p2p_peers;
  std::unique_ptr<std::atomic<uint32_t>[]> p2p_seq;
};

class CommRegistry {
 public:
  static constexpr uint32_t kSlots = 4096;  // power of two
  // Peers beyond this get seq 0 for p2p (bounds the per-comm allocation).
  static constexpr int32_t kMaxP2pPeers = 1 << 16;

  CommRegistry();
  CommRegistry(const CommRegistry&) = delete;
  CommRegistry& operator=(const CommRegistry&) = delete;

  // The process-wide registry (constructed on first use, never destroyed so
  // that late calls during exit stay safe).
  static CommRegistry& Get();

  // Adds `comm`; replaces a retired or live entry for the same handle (NCCL
  // may reuse an address). Returns nullptr when the table is full.
  CommInfo* Register(const void* comm, uint64_t comm_id, int32_t rank, int32_t nranks,
                     int32_t device);
  // Live entry for `comm`, or nullptr.
  CommInfo* Find(const void* comm) const;
  // Marks the entry retired; later Find() returns nullptr.
  void Retire(const void* comm);

  // Next 1-based collective seq on `info` (info may be nullptr: returns 0).
  static uint32_t NextCollectiveSeq(CommInfo* info);
  // Next 1-based seq of a send to (send=true) / receive from `peer`.
  static uint32_t NextP2pSeq(CommInfo* info, int peer, bool send);
  // Next split/shrink ordinal on the parent `info`.
  static uint32_t NextSplitOrdinal(CommInfo* info);

  // Seq of the most recent collective on `comm`, 0 if unknown.
  uint32_t LastSeq(const void* comm) const;
  // comm_id of `comm`, 0 if unknown.
  uint64_t Id(const void* comm) const;

 private:
  static uint32_t Hash(const void* p);

  std::atomic<CommInfo*> slots_[kSlots];
  std::mutex mu_;                                 // serialises writers
  std::vector<std::unique_ptr<CommInfo>> owned_;  // every CommInfo ever made; guarded by mu_
};

// For the hook core's C API (xpu_comm_last_seq / xpu_comm_id in hook_api.h).
uint32_t CommLastSeq(const void* comm);
uint64_t CommId(const void* comm);

}  // namespace xpu::hook

#endif  // XPU_HOOK_INTERPOSERS_COMM_REGISTRY_H_
