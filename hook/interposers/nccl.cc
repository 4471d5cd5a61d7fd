// hook/interposers/nccl.cc — interposers for NCCL 2.28 (libnccl.so.2):
// communicator lifecycle, collectives, point-to-point and groups.
//
// Communicators are registered in CommRegistry at creation (comm_id derived
// from what every member passes identically, see comm_registry.h) and an
// XPU_OP_COMM_INIT host record is written; finalize/destroy/abort write
// XPU_OP_COMM_DESTROY records named by the API.
//
// Sequence numbers are counted for every collective and p2p call made by
// the application, also while tracing is switched off, so that a rank that
// toggles tracing keeps agreeing with its peers.
//
// Groups: between ncclGroupStart and the outermost ncclGroupEnd, NCCL only
// enqueues; the kernels launch inside the outermost ncclGroupEnd. The ops of
// a group are therefore collected in a fixed thread-local array (overflow
// counted as XPU_CNT_PENDING_FULL), BeginGpuOp'ed in issue order just before
// the real ncclGroupEnd and EndGpuOp'ed after it. Ops on one stream then
// share the fused kernel's timing, which is what the GPU did.
//
// NCCL profiler plugin (hook/nccl_profiler/, docs/timing-policy.md): every
// collective / p2p call is also appended to a thread-local issue list for
// the duration of the real call (until the outermost ncclGroupEnd for grouped
// ops), so that the plugin can join its events to this call's sig_id and seq
// (nccl_plugin_join.h). Once a plugin attached, the kinds it times get a
// non-timing completion event only (extra flag XPU_REC_NOT_TIMED).
//
// Python call sites (py_callsite.h): a sampled op issued by a thread that
// holds the GIL is linked to its Python stack after the real call; grouped
// ops take the stack of the outermost ncclGroupEnd, where they launch.
//
// Non-blocking communicators (config->blocking = 0) may return
// ncclInProgress: that is treated as success for records, and the op's
// timing is then an upper bound of the enqueue, not of the kernel.
//
// Thread-safety: group state is thread-local (NCCL's group semantics are
// per thread too); the registry is lock-free on the launch path.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdint>

#include "hook/core_api.h"
#include "hook/interposers/comm_registry.h"
#include "hook/interposers/nccl_plugin_join.h"
#include "hook/interposers/signature_fields.h"

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace xpu::hook {
namespace {

// Returned when the real symbol cannot be resolved.
constexpr ncclResult_t kMissing = ncclSystemError;

inline bool NcclOk(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }

uint8_t NcclTypeToXpu(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
      return XPU_DT_I8;
    case ncclUint8:
      return XPU_DT_U8;
    case ncclInt32:
      return XPU_DT_I32;
    case ncclUint32:
      return XPU_DT_U32;
    case ncclInt64:
      return XPU_DT_I64;
    case ncclUint64:
      return XPU_DT_U64;
    case ncclFloat16:
      return XPU_DT_F16;
    case ncclFloat32:
      return XPU_DT_F32;
    case ncclFloat64:
      return XPU_DT_F64;
    case ncclBfloat16:
      return XPU_DT_BF16;
    case ncclFloat8e4m3:
      return XPU_DT_F8_E4M3;
    case ncclFloat8e5m2:
      return XPU_DT_F8_E5M2;
    default:
      return XPU_DT_UNKNOWN;
  }
}

// ---- thread-local group state ----------------------------------------------

struct PendingOp {
  uint32_t sig_id;
  uint32_t seq;
  const void* stream;
  uint16_t flags;  // extra_flags for BeginGpuOp (XPU_REC_NOT_TIMED: plugin-timed)
};
constexpr uint32_t kMaxGroupOps = 128;
// Trivially constructible: zero-initialised per thread, no TLS init guard.
struct GroupState {
  int32_t depth;
  uint32_t n;
  PendingOp ops[kMaxGroupOps];
};
thread_local GroupState t_group;

// ---- communicator helpers (creation path: may call NCCL/cudart queries) ----

int32_t CurrentDevice() {
  int dev = -1;
  auto get_device = XPU_REAL_FN(kCudart, cudaGetDevice);
  if (get_device == nullptr || get_device(&dev) != cudaSuccess) dev = -1;
  return dev;
}

int32_t CommDevice(ncclComm_t comm) {
  int dev = -1;
  auto cu_device = XPU_REAL_FN(kNccl, ncclCommCuDevice);
  if (cu_device != nullptr && cu_device(comm, &dev) == ncclSuccess) return dev;
  return -1;
}

void QueryRankAndSize(ncclComm_t comm, int32_t* rank, int32_t* nranks) {
  int r = -1, n = 0;
  auto user_rank = XPU_REAL_FN(kNccl, ncclCommUserRank);
  auto count = XPU_REAL_FN(kNccl, ncclCommCount);
  if (user_rank == nullptr || user_rank(comm, &r) != ncclSuccess) r = -1;
  if (count == nullptr || count(comm, &n) != ncclSuccess) n = 0;
  *rank = r;
  *nranks = n;
}

// Rank/size/device of a communicator whose init was still in progress at
// creation are filled in on first use.
CommInfo* LookupComm(ncclComm_t comm) {
  CommInfo* info = CommRegistry::Get().Find(comm);
  if (info != nullptr && info->nranks.load(std::memory_order_relaxed) <= 0) {
    int32_t r, n;
    QueryRankAndSize(comm, &r, &n);
    if (n > 0) {
      info->rank.store(r, std::memory_order_relaxed);
      info->nranks.store(n, std::memory_order_relaxed);
      if (info->device.load(std::memory_order_relaxed) < 0) {
        info->device.store(CommDevice(comm), std::memory_order_relaxed);
      }
    }
  }
  return info;
}

void FillCommFields(const CommInfo* info, xpu_signature_v1* sig) {
  if (info == nullptr) return;
  sig->comm_id = info->comm_id;
  sig->comm_rank = info->rank.load(std::memory_order_relaxed);
  sig->comm_nranks = info->nranks.load(std::memory_order_relaxed);
  sig->device = info->device.load(std::memory_order_relaxed);
}

template <size_t N>
void EmitLifecycle(uint16_t kind, const char (&name)[N], const CommInfo* info, uint64_t start,
                   uint64_t end, uint32_t value, ncclResult_t status) {
  if (!Active()) return;
  EnsureStarted();
  xpu_signature_v1 sig = MakeSignature(kind);
  FillCommFields(info, &sig);
  const uint32_t sig_id = InternSignature(sig, name, N - 1);
  if (sig_id == 0) return;
  EmitHostInterval(sig_id, start, end, value,
                   NcclOk(status) ? 0 : static_cast<uint16_t>(XPU_REC_CALL_FAILED));
}

// Registers a new communicator and writes its XPU_OP_COMM_INIT record.
template <size_t N>
void OnCreated(const char (&name)[N], ncclComm_t comm, uint64_t comm_id, int32_t rank,
               int32_t nranks, int32_t device, uint64_t start, ncclResult_t status) {
  const uint64_t end = NowNs();
  if (!NcclOk(status) || comm == nullptr) {
    EmitLifecycle(XPU_OP_COMM_INIT, name, nullptr, start, end, 0, status);
    return;
  }
  const int32_t d = CommDevice(comm);
  CommInfo* info = CommRegistry::Get().Register(comm, comm_id, rank, nranks, d >= 0 ? d : device);
  if (info == nullptr) Count(XPU_CNT_INTERNAL);
  EmitLifecycle(XPU_OP_COMM_INIT, name, info, start, end, 0, status);
}

// ---- ops ---------------------------------------------------------------------

enum class SeqKind { kCollective, kSend, kRecv };

// Shared body of every collective / p2p interposer. `peer` is the root or
// the p2p peer, -1 otherwise.
template <size_t N, typename Call>
inline ncclResult_t CommOp(const ReentrancyGuard& g, uint16_t kind, const char (&name)[N],
                           size_t count, ncclDataType_t dtype, int peer, SeqKind seq_kind,
                           ncclComm_t comm, cudaStream_t stream, Call call) {
  if (!g.entered()) return call();
  CommInfo* info = LookupComm(comm);
  const uint32_t seq = seq_kind == SeqKind::kCollective
                           ? CommRegistry::NextCollectiveSeq(info)
                           : CommRegistry::NextP2pSeq(info, peer, seq_kind == SeqKind::kSend);
  if (!Active()) return call();
  EnsureStarted();
  xpu_signature_v1 sig = MakeSignature(kind);
  sig.dtype = NcclTypeToXpu(dtype);
  sig.count = count;
  sig.peer = peer;
  FillCommFields(info, &sig);
  const uint32_t sig_id = InternSignature(sig, name, N - 1);
  if (sig_id == 0) return call();
  GroupState& grp = t_group;
  // With the NCCL profiler plugin attached, the plugin times this op and
  // joins it through the issue list (nccl_plugin_join.h); the core then only
  // tracks its completion (docs/timing-policy.md).
  const uint16_t flags = NcclPluginTimes(kind) ? static_cast<uint16_t>(XPU_REC_NOT_TIMED) : 0;
  NcclIssuedOp issued;
  issued.sig_id = sig_id;
  issued.seq = seq;
  issued.comm_id = sig.comm_id;
  issued.count = count;
  issued.bytes = static_cast<uint64_t>(count) * xpu_dtype_size(sig.dtype);
  issued.kind = kind;
  issued.stream = StreamIndex(stream);
  issued.peer = peer;
  issued.rank = sig.comm_rank;
  issued.nranks = sig.comm_nranks;
  if (grp.depth > 0) {
    // Enqueued only: timed around the outermost ncclGroupEnd.
    if (grp.n < kMaxGroupOps) {
      grp.ops[grp.n++] = PendingOp{sig_id, seq, stream, flags};
    } else {
      Count(XPU_CNT_PENDING_FULL);
    }
    if (!NcclIssuePush(issued)) Count(XPU_CNT_PENDING_FULL);
    return call();
  }
  OpHandle op = BeginGpuOp(sig_id, stream, seq, flags);
  issued.launch_ns = op.launch_ns != 0 ? op.launch_ns : NowNs();
  NcclIssueClear();  // no group open: anything left is from an abandoned group
  const bool pushed = NcclIssuePush(issued);
  if (!pushed) Count(XPU_CNT_PENDING_FULL);
  const ncclResult_t status = call();
  // An op the plugin should have timed but did not claim will not be
  // announced complete by it: it needs a completion marker of its own.
  if (flags != 0 && !(pushed && NcclIssueClaimed(0))) op.want_marker = 1;
  NcclIssueClear();
  EndGpuOp(op, stream, NcclOk(status) ? 0 : static_cast<int>(status));
  if (op.picked) EmitCallsiteLink(op, CapturePyCallsite());
  return status;
}

}  // namespace
}  // namespace xpu::hook

using xpu::hook::CommRegistry;
using xpu::hook::ReentrancyGuard;
using xpu::hook::SeqKind;

// ---- communicator lifecycle --------------------------------------------------

XPU_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                         int rank) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommInitRank);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered() || comm == nullptr) return real(comm, nranks, comm_id, rank);
  const uint64_t start = xpu::hook::NowNs();
  const int32_t device = xpu::hook::CurrentDevice();
  const ncclResult_t rc = real(comm, nranks, comm_id, rank);
  xpu::hook::OnCreated("ncclCommInitRank", *comm,
                       xpu::hook::CommIdFromUniqueId(&comm_id, sizeof(comm_id)), rank, nranks,
                       device, start, rc);
  return rc;
}

XPU_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                               int rank, ncclConfig_t* config) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommInitRankConfig);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered() || comm == nullptr) return real(comm, nranks, comm_id, rank, config);
  const uint64_t start = xpu::hook::NowNs();
  const int32_t device = xpu::hook::CurrentDevice();
  const ncclResult_t rc = real(comm, nranks, comm_id, rank, config);
  xpu::hook::OnCreated("ncclCommInitRankConfig", *comm,
                       xpu::hook::CommIdFromUniqueId(&comm_id, sizeof(comm_id)), rank, nranks,
                       device, start, rc);
  return rc;
}

XPU_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                 int n_id, ncclUniqueId* comm_ids,
                                                 ncclConfig_t* config) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommInitRankScalable);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered() || newcomm == nullptr) {
    return real(newcomm, nranks, myrank, n_id, comm_ids, config);
  }
  // Every member passes the same id array; the first id names the comm.
  const uint64_t id = (comm_ids != nullptr && n_id > 0)
                          ? xpu::hook::CommIdFromUniqueId(&comm_ids[0], sizeof(ncclUniqueId))
                          : 0;
  const uint64_t start = xpu::hook::NowNs();
  const int32_t device = xpu::hook::CurrentDevice();
  const ncclResult_t rc = real(newcomm, nranks, myrank, n_id, comm_ids, config);
  xpu::hook::OnCreated("ncclCommInitRankScalable", *newcomm, id, myrank, nranks, device, start, rc);
  return rc;
}

XPU_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommInitAll);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered() || comms == nullptr) return real(comms, ndev, devlist);
  const uint64_t start = xpu::hook::NowNs();
  const ncclResult_t rc = real(comms, ndev, devlist);
  const uint64_t id = xpu::hook::CommIdFromInitAll(devlist, ndev, static_cast<int>(getpid()));
  if (!xpu::hook::NcclOk(rc)) {
    xpu::hook::OnCreated("ncclCommInitAll", nullptr, id, -1, ndev, -1, start, rc);
    return rc;
  }
  for (int i = 0; i < ndev; ++i) {
    xpu::hook::OnCreated("ncclCommInitAll", comms[i], id, i, ndev, devlist ? devlist[i] : i, start,
                         rc);
  }
  return rc;
}

XPU_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                      ncclConfig_t* config) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommSplit);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered()) return real(comm, color, key, newcomm, config);
  // Every member of the parent calls split, including those passing
  // NCCL_SPLIT_NOCOLOR, so the ordinal advances identically on all of them.
  xpu::hook::CommInfo* parent = xpu::hook::LookupComm(comm);
  const uint32_t ordinal = CommRegistry::NextSplitOrdinal(parent);
  const uint64_t id = xpu::hook::CommIdFromSplit(parent ? parent->comm_id : 0, color, ordinal);
  const uint64_t start = xpu::hook::NowNs();
  const ncclResult_t rc = real(comm, color, key, newcomm, config);
  if (newcomm != nullptr && *newcomm != nullptr && xpu::hook::NcclOk(rc)) {
    int32_t rank, nranks;
    xpu::hook::QueryRankAndSize(*newcomm, &rank, &nranks);
    xpu::hook::OnCreated("ncclCommSplit", *newcomm, id, rank, nranks,
                         parent ? parent->device.load(std::memory_order_relaxed) : -1, start, rc);
  } else if (!xpu::hook::NcclOk(rc)) {
    xpu::hook::OnCreated("ncclCommSplit", nullptr, id, -1, 0, -1, start, rc);
  }
  return rc;
}

XPU_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude_ranks, int exclude_count,
                                       ncclComm_t* newcomm, ncclConfig_t* config,
                                       int shrink_flags) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclCommShrink);
  if (!real) return xpu::hook::kMissing;
  if (!g.entered()) return real(comm, exclude_ranks, exclude_count, newcomm, config, shrink_flags);
  xpu::hook::CommInfo* parent = xpu::hook::LookupComm(comm);
  const uint32_t ordinal = CommRegistry::NextSplitOrdinal(parent);
  const uint64_t id = xpu::hook::CommIdFromShrink(parent ? parent->comm_id : 0, ordinal);
  const uint64_t start = xpu::hook::NowNs();
  const ncclResult_t rc = real(comm, exclude_ranks, exclude_count, newcomm, config, shrink_flags);
  if (newcomm != nullptr && *newcomm != nullptr && xpu::hook::NcclOk(rc)) {
    int32_t rank, nranks;
    xpu::hook::QueryRankAndSize(*newcomm, &rank, &nranks);
    xpu::hook::OnCreated("ncclCommShrink", *newcomm, id, rank, nranks,
                         parent ? parent->device.load(std::memory_order_relaxed) : -1, start, rc);
  } else if (!xpu::hook::NcclOk(rc)) {
    xpu::hook::OnCreated("ncclCommShrink", nullptr, id, -1, 0, -1, start, rc);
  }
  return rc;
}

namespace xpu::hook {
namespace {
// Finalize / destroy / abort: an XPU_OP_COMM_DESTROY interval (finalize
// waits for outstanding work, so its interval matters for hang diagnosis);
// value = the last collective seq issued on the comm.
template <size_t N, typename Call>
ncclResult_t Teardown(const char (&name)[N], ncclComm_t comm, bool retire, Call call) {
  ReentrancyGuard g;
  if (!g.entered()) return call();
  const CommInfo* info = CommRegistry::Get().Find(comm);
  const uint32_t last_seq = info ? info->coll_seq.load(std::memory_order_relaxed) : 0;
  const uint64_t start = NowNs();
  const ncclResult_t rc = call();
  const uint64_t end = NowNs();
  // Retire first: the handle may be reused by NCCL as soon as it is freed.
  if (retire) CommRegistry::Get().Retire(comm);
  EmitLifecycle(XPU_OP_COMM_DESTROY, name, info, start, end, last_seq, rc);
  return rc;
}
}  // namespace
}  // namespace xpu::hook

XPU_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  auto real = XPU_REAL_FN(kNccl, ncclCommFinalize);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Teardown("ncclCommFinalize", comm, false, [&] { return real(comm); });
}

XPU_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  auto real = XPU_REAL_FN(kNccl, ncclCommDestroy);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Teardown("ncclCommDestroy", comm, true, [&] { return real(comm); });
}

XPU_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  auto real = XPU_REAL_FN(kNccl, ncclCommAbort);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Teardown("ncclCommAbort", comm, true, [&] { return real(comm); });
}

// ---- collectives -------------------------------------------------------------

XPU_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclAllReduce);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_ALLREDUCE, "ncclAllReduce", count, datatype, -1, SeqKind::kCollective, comm, stream,
      [&] { return real(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclAllGather);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_ALLGATHER, "ncclAllGather", sendcount, datatype, -1, SeqKind::kCollective, comm,
      stream, [&] { return real(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclReduceScatter);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(g, XPU_OP_REDUCESCATTER, "ncclReduceScatter", recvcount, datatype, -1,
                           SeqKind::kCollective, comm, stream, [&] {
                             return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
                           });
}

XPU_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclBroadcast);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_BROADCAST, "ncclBroadcast", count, datatype, root, SeqKind::kCollective, comm,
      stream, [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclBcast);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(g, XPU_OP_BROADCAST, "ncclBcast", count, datatype, root,
                           SeqKind::kCollective, comm, stream,
                           [&] { return real(buff, count, datatype, root, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclReduce);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_REDUCE, "ncclReduce", count, datatype, root, SeqKind::kCollective, comm, stream,
      [&] { return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclComm_t comm,
                                     cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclAlltoAll);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(g, XPU_OP_ALLTOALL, "ncclAlltoAll", count, datatype, -1,
                           SeqKind::kCollective, comm, stream,
                           [&] { return real(sendbuff, recvbuff, count, datatype, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclGather);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_GATHER, "ncclGather", count, datatype, root, SeqKind::kCollective, comm, stream,
      [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclScatter);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(
      g, XPU_OP_SCATTER, "ncclScatter", count, datatype, root, SeqKind::kCollective, comm, stream,
      [&] { return real(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

// ---- point-to-point ----------------------------------------------------------

XPU_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                 int peer, ncclComm_t comm, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclSend);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(g, XPU_OP_SEND, "ncclSend", count, datatype, peer, SeqKind::kSend, comm,
                           stream,
                           [&] { return real(sendbuff, count, datatype, peer, comm, stream); });
}

XPU_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclRecv);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::CommOp(g, XPU_OP_RECV, "ncclRecv", count, datatype, peer, SeqKind::kRecv, comm,
                           stream,
                           [&] { return real(recvbuff, count, datatype, peer, comm, stream); });
}

// ---- groups ------------------------------------------------------------------

XPU_EXPORT ncclResult_t ncclGroupStart() {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclGroupStart);
  if (!real) return xpu::hook::kMissing;
  const ncclResult_t rc = real();
  if (g.entered() && rc == ncclSuccess) ++xpu::hook::t_group.depth;
  return rc;
}

XPU_EXPORT ncclResult_t ncclGroupEnd() {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kNccl, ncclGroupEnd);
  if (!real) return xpu::hook::kMissing;
  xpu::hook::GroupState& grp = xpu::hook::t_group;
  if (!g.entered() || grp.depth <= 0) return real();
  if (--grp.depth > 0) return real();
  if (grp.n == 0) {
    const ncclResult_t rc = real();
    xpu::hook::NcclIssueClear();
    return rc;
  }
  // Outermost end with collected ops: their kernels launch inside this call.
  // Each op's seq was assigned at its own call; records keep issue order.
  const uint32_t n = grp.n;
  grp.n = 0;
  xpu::hook::OpHandle handles[xpu::hook::kMaxGroupOps];
  for (uint32_t i = 0; i < n; ++i) {
    handles[i] = xpu::hook::BeginGpuOp(grp.ops[i].sig_id, grp.ops[i].stream, grp.ops[i].seq,
                                       grp.ops[i].flags);
  }
  xpu::hook::NcclIssueSetLaunch(xpu::hook::NowNs());
  const ncclResult_t rc = real();
  // Issue-list entries were pushed in the order of grp.ops (one each, unless
  // the list was full): unclaimed plugin-timed ops need their own marker.
  for (uint32_t i = 0; i < n; ++i) {
    if (grp.ops[i].flags != 0 && !xpu::hook::NcclIssueClaimed(i)) handles[i].want_marker = 1;
  }
  xpu::hook::NcclIssueClear();
  const int status = xpu::hook::NcclOk(rc) ? 0 : static_cast<int>(rc);
  for (uint32_t i = 0; i < n; ++i) xpu::hook::EndGpuOp(handles[i], grp.ops[i].stream, status);
  // The group's kernels launch here: its sampled ops share the Python stack
  // of this outermost ncclGroupEnd, walked once.
  uint32_t stack = 0;
  bool walked = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (!handles[i].picked) continue;
    if (!walked) {
      stack = xpu::hook::CapturePyCallsite();
      walked = true;
    }
    xpu::hook::EmitCallsiteLink(handles[i], stack);
  }
  return rc;
}
