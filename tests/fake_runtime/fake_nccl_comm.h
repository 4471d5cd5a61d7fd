// tests/fake_runtime/fake_nccl_comm.h — the communicator engine of the fake
// NCCL (fake_nccl.cc is the C API on top): process-local communicator state,
// the cross-process rendezvous of collectives and point-to-point ops through
// the shared-memory segment of fake_nccl_shm.h, and communicator
// init/teardown. The model is described at the top of fake_nccl.cc.
//
// Thread-safety: every function is safe to call from any thread. A
// communicator's execution-time counters are touched only by the stream
// worker that runs its ops.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_COMM_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_COMM_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_nccl_shm.h"

constexpr uint32_t kCommMagic = 0x434f4d4d;  // "COMM"

struct ncclComm {
  uint32_t magic = kCommMagic;
  int rank = 0;
  int nranks = 0;
  int device = 0;
  ncclUniqueId id{};
  std::string shm_name;
  xpu_fake_nccl_segment* seg = nullptr;
  double link_factor = 1.0;  // slow-link injection, same on every member
  // Execution-time sequence counters, touched by stream workers only.
  std::atomic<uint64_t> coll_seq{0};
  std::atomic<uint64_t> send_seq[XPU_FAKE_NCCL_MAX_RANKS] = {};
  std::atomic<uint64_t> recv_seq[XPU_FAKE_NCCL_MAX_RANKS] = {};
  std::atomic<uint64_t> splits{0};   // host: ncclCommSplit generation
  std::atomic<uint64_t> shrinks{0};  // host: ncclCommShrink generation
  std::atomic<int> pending{0};       // enqueued ops not yet finished
  std::atomic<bool> aborted{false};
  // Profiler plugin context of this communicator (fake_nccl_profiler.h);
  // null when no plugin is loaded or its init failed.
  void* prof_ctx = nullptr;
  int prof_mask = 0;
};

namespace xpu::fake::nccl {

enum class Kind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kSend,
  kRecv
};

struct PendingOp {
  ncclComm* comm;
  Kind kind;
  uint64_t size_bytes;  // nccl-tests "size"
  int peer;             // Send/Recv only
  cudaStream_t stream;
  // For the profiler plugin's descriptors (fake_nccl_profiler.h).
  size_t count = 0;  // as passed to the API
  ncclDataType_t dtype = ncclInt8;
  int root = -1;         // rooted collectives
  void* prof = nullptr;  // the plugin's Coll/P2p event handle
  uint8_t nchannels = 0;
};

inline uint64_t Load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void Store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// Bytes of one element, 0 for an unknown type.
size_t TypeSize(ncclDataType_t t);
// Waits until *p >= target; false if `c` was aborted meanwhile.
bool WaitAtLeast(const ncclComm* c, const uint64_t* p, uint64_t target);
// Enqueues `ops` (all on ops[0].stream) as one fused op.
ncclResult_t EnqueueOps(std::vector<PendingOp> ops);
// True for a live communicator handle (never dereferences a bogus one).
bool ValidComm(const ncclComm* c);
// Joins (creating if first) the communicator named by `id`; blocks until
// all `nranks` members joined.
ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank);
// Waits for queued ops, detaches; the last member removes the segment.
ncclResult_t Release(ncclComm_t comm);
ncclResult_t NewUniqueId(ncclUniqueId* id);
// A child communicator's id: a deterministic function of the parent's id and
// `salt`, so that every member computes the same one without talking.
ncclUniqueId DeriveId(const ncclUniqueId& parent, uint64_t salt);
uint64_t Mix(uint64_t x);
void SleepUs(long us);

}  // namespace xpu::fake::nccl

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_COMM_H_
