// tests/fake_runtime/fake_nccl.cc — test double of libnccl.so.2 (2.28.9 API).
//
// Model: a communicator is a POSIX shared-memory segment named after the
// unique id (layout and protocol: fake_nccl_shm.h) plus process-local state.
// A collective enqueues one op on the stream; when the stream worker reaches
// it, the op announces its arrival, waits (polling with short sleeps) until
// every member has arrived at the same sequence number, then sleeps until
//   start + size * busbw_factor / (XPU_FAKE_NET_GBPS * 1e9) s
//   (x XPU_FAKE_SLOW_LINK_FACTOR if a member's RANK is in
//   XPU_FAKE_SLOW_LINK_RANKS)
// with start = the last member's arrival and size/factor as in nccl-tests —
// so all members complete together, as a real ring does. A member that never
// arrives (stopped, hung, skipped the call) blocks the others inside the
// "kernel" forever, exactly like a real ring; ncclCommAbort releases them.
// Buffers are not touched (no reduction is computed).
//
// Sequence numbers are taken when the op executes on the stream, not when it
// is enqueued, so that captured graphs replay with fresh numbers; all
// collectives of a communicator must therefore be issued on one stream per
// rank (what every framework does).
// ncclGroupStart/End: the ops issued on one stream inside a group run as one
// fused op that first announces every arrival and then waits for every peer,
// so a ring exchange of Send/Recv cannot deadlock; grouped ops overlap in
// time (the group ends at the latest modelled end).
//
// Thread-safety: every function is safe to call from any thread; group state
// is per thread, as in NCCL.
#include <nccl.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "fake_core.h"
#include "fake_nccl_comm.h"
#include "fake_nccl_profiler.h"
#include "fake_nccl_shm.h"

namespace fk = xpu::fake;
using xpu::fake::nccl::DeriveId;
using xpu::fake::nccl::EnqueueOps;
using xpu::fake::nccl::InitRank;
using xpu::fake::nccl::Kind;
using xpu::fake::nccl::Mix;
using xpu::fake::nccl::NewUniqueId;
using xpu::fake::nccl::PendingOp;
using xpu::fake::nccl::Release;
using xpu::fake::nccl::SleepUs;
using xpu::fake::nccl::Store;
using xpu::fake::nccl::TypeSize;
using xpu::fake::nccl::ValidComm;
using xpu::fake::nccl::WaitAtLeast;

namespace {

thread_local int t_group_depth = 0;

// Enqueues `ops` (one stream) as one fused op, with the profiler plugin's
// launch-side events around it (fake_nccl_profiler.h).
ncclResult_t Launch(std::vector<PendingOp> ops) {
  void* group = xpu::fake::nccl::prof::LaunchBegin(&ops);
  ncclResult_t r = EnqueueOps(ops);
  xpu::fake::nccl::prof::LaunchEnd(ops, group);
  return r;
}
thread_local std::vector<PendingOp>* t_group_ops = nullptr;

ncclResult_t Submit(ncclComm* comm, Kind kind, size_t count, ncclDataType_t dt, int peer,
                    cudaStream_t stream, int root = -1) {
  if (!ValidComm(comm) || comm->aborted.load()) return ncclInvalidArgument;
  size_t el = TypeSize(dt);
  if (el == 0) return ncclInvalidArgument;
  if ((kind == Kind::kSend || kind == Kind::kRecv) && (peer < 0 || peer >= comm->nranks)) {
    return ncclInvalidArgument;
  }
  if (fk::ResolveStream(stream) == nullptr) return ncclInvalidArgument;
  uint64_t n = static_cast<uint64_t>(comm->nranks);
  uint64_t size = count * el;
  switch (kind) {
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kAllToAll:
    case Kind::kGather:
    case Kind::kScatter:
      size *= n;
      break;
    default:
      break;
  }
  PendingOp op{comm, kind, size, peer, stream};
  op.count = count;
  op.dtype = dt;
  op.root = root;
  if (t_group_depth > 0) {
    if (t_group_ops == nullptr) t_group_ops = new std::vector<PendingOp>;
    t_group_ops->push_back(op);
    return ncclSuccess;
  }
  return Launch({op});
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  XPU_FAKE_COUNT_CALL();
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  XPU_FAKE_COUNT_CALL();
  return NewUniqueId(uniqueId);
}

const char* ncclGetErrorString(ncclResult_t result) {
  XPU_FAKE_COUNT_CALL();
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  return "";
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  XPU_FAKE_COUNT_CALL();
  return InitRank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  return InitRank(comm, nranks, commId, rank);
}

// One process drives `ndev` ranks: the inits rendezvous with each other, so
// they run on one thread per rank.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  XPU_FAKE_COUNT_CALL();
  if (comm == nullptr || ndev < 1 || ndev > XPU_FAKE_NCCL_MAX_RANKS) return ncclInvalidArgument;
  ncclUniqueId id;
  ncclResult_t r = NewUniqueId(&id);
  if (r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      int dev = devlist ? devlist[i] : i;
      if (fk::SetCurrentDevice(dev) != cudaSuccess) {
        results[i] = ncclInvalidArgument;
        return;
      }
      results[i] = InitRank(&comm[i], ndev, id, i);
    });
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t res : results) {
    if (res != ncclSuccess) return res;  // peers then block in init, as in NCCL
  }
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || newcomm == nullptr) return ncclInvalidArgument;
  xpu_fake_nccl_segment* seg = comm->seg;
  xpu_fake_nccl_slot& me = seg->slots[comm->rank];
  uint64_t g = ++comm->splits;
  me.split_color = color;
  me.split_key = key;
  Store(&me.split_posted, g);
  std::vector<std::pair<int, int>> members;  // (key, old rank) with my color
  for (int r = 0; r < comm->nranks; ++r) {
    WaitAtLeast(comm, &seg->slots[r].split_posted, g);
    if (color != NCCL_SPLIT_NOCOLOR && seg->slots[r].split_color == color) {
      members.emplace_back(seg->slots[r].split_key, r);
    }
  }
  // Second phase: nobody posts the next split's color before all have read.
  Store(&me.split_read, g);
  for (int r = 0; r < comm->nranks; ++r) WaitAtLeast(comm, &seg->slots[r].split_read, g);
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == comm->rank) new_rank = static_cast<int>(i);
  }
  // Every member derives the same child id from (parent id, generation, color).
  uint64_t h = Mix(g) ^ Mix(static_cast<uint64_t>(static_cast<uint32_t>(color)) + 0x51);
  return InitRank(newcomm, static_cast<int>(members.size()), DeriveId(comm->id, h), new_rank);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  while (comm->pending.load() > 0) SleepUs(100);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  return Release(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm)) return ncclInvalidArgument;
  comm->aborted.store(true);  // releases ops blocked in a rendezvous
  return Release(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || asyncError == nullptr) return ncclInvalidArgument;
  *asyncError = comm->aborted.load() ? ncclRemoteError : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || device == nullptr) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  XPU_FAKE_COUNT_CALL();
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  XPU_FAKE_COUNT_CALL();
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0 || t_group_ops == nullptr) return ncclSuccess;
  // One fused op per stream, in issue order.
  std::map<cudaStream_t, std::vector<PendingOp>> by_stream;
  std::vector<cudaStream_t> order;
  for (const PendingOp& op : *t_group_ops) {
    if (!by_stream.count(op.stream)) order.push_back(op.stream);
    by_stream[op.stream].push_back(op);
  }
  t_group_ops->clear();
  ncclResult_t result = ncclSuccess;
  for (cudaStream_t s : order) {
    ncclResult_t r = Launch(std::move(by_stream[s]));
    if (r != ncclSuccess) result = r;
  }
  return result;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllReduce, count, datatype, -1, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllGather, sendcount, datatype, -1, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kReduceScatter, recvcount, datatype, -1, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kBroadcast, count, datatype, -1, stream, root);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kBroadcast, count, datatype, -1, stream, root);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kReduce, count, datatype, -1, stream, root);
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kAllToAll, count, datatype, -1, stream);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kGather, count, datatype, -1, stream, root);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (ValidComm(comm) && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Submit(comm, Kind::kScatter, count, datatype, -1, stream, root);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kSend, count, datatype, peer, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Submit(comm, Kind::kRecv, count, datatype, peer, stream);
}

// Multi-id init: the first id names the communicator (the others only spread
// bootstrap load in real NCCL).
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  XPU_FAKE_COUNT_CALL();
  if (nId < 1 || commIds == nullptr) return ncclInvalidArgument;
  return InitRank(newcomm, nranks, commIds[0], myrank);
}

// Only the surviving ranks call shrink, so there is no rendezvous on the
// parent: every survivor derives the same child id from (parent id, shrink
// generation, excluded set) and its new rank from the ranks excluded below it.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  XPU_FAKE_COUNT_CALL();
  if (!ValidComm(comm) || newcomm == nullptr || excludeRanksCount < 0 ||
      (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return ncclInvalidArgument;
  }
  std::vector<bool> excluded(comm->nranks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nranks) return ncclInvalidArgument;
    excluded[r] = true;
  }
  if (excluded[comm->rank]) return ncclInvalidArgument;
  int new_rank = 0, new_n = 0;
  uint64_t h = Mix(++comm->shrinks + 0x5348);
  for (int r = 0; r < comm->nranks; ++r) {
    if (excluded[r]) {
      h = Mix(h ^ static_cast<uint64_t>(r));
      continue;
    }
    if (r < comm->rank) ++new_rank;
    ++new_n;
  }
  return InitRank(newcomm, new_n, DeriveId(comm->id, h), new_rank);
}

}  // extern "C"
