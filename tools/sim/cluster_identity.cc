// tools/sim/cluster_identity.cc — what ClusterModel tells about each rank
// besides its records: identity, signature table, hang-watch table.
#include <algorithm>

#include "tools/sim/cluster_model.h"
#include "xpu/formulas.h"

namespace xpu::sim {
namespace {

xpu::v1::Signature Gemm(uint32_t id, uint64_t m, uint64_t n, uint64_t k, const char* name) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(XPU_OP_GEMM);
  s.set_dtype(XPU_DT_BF16);
  s.set_out_dtype(XPU_DT_BF16);
  s.set_name(name);
  s.set_m(static_cast<uint32_t>(m));
  s.set_n(static_cast<uint32_t>(n));
  s.set_k(static_cast<uint32_t>(k));
  s.set_batch(1);
  s.set_comm_rank(-1);
  s.set_peer(-1);
  return s;
}

xpu::v1::Signature Coll(uint32_t id, uint32_t kind, uint64_t bytes, uint64_t comm, int32_t rank,
                        int32_t nranks, int32_t peer, const char* name) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(kind);
  s.set_dtype(XPU_DT_BF16);
  s.set_name(name);
  s.set_count(bytes / 2);
  s.set_comm_id(comm);
  s.set_comm_rank(rank);
  s.set_comm_nranks(nranks);
  s.set_peer(peer);
  return s;
}

xpu::v1::Signature HostSig(uint32_t id, uint32_t kind, const char* name) {
  xpu::v1::Signature s;
  s.set_id(id);
  s.set_kind(kind);
  s.set_name(name);
  s.set_comm_rank(-1);
  s.set_peer(-1);
  return s;
}

}  // namespace

void ClusterModel::FillIdentity(int32_t r, xpu::v1::ProcessIdentity* id) const {
  id->set_job(spec_.job);
  id->set_job_name(spec_.job_name);
  id->set_host(HostName(HostOf(r)));
  id->set_pid(Pid(r));
  id->set_rank(r);
  id->set_local_rank(r % spec_.ranks_per_host);
  id->set_world_size(spec_.ranks);
  id->set_local_world_size(spec_.ranks_per_host);
  id->set_device(r % spec_.ranks_per_host);
  id->set_uid(1000);
  id->set_gpu_model(spec_.gpu_model);
}

void ClusterModel::AppendSignatures(int32_t r, xpu::v1::ProcessBatch* pb) const {
  const Layout& l = spec_.layout;
  const uint64_t h = Hidden(), t = kTokens, tp = static_cast<uint64_t>(l.tp);
  *pb->add_signatures() = Gemm(kQkv, 3 * h / tp, t, h, "cublasGemmEx");
  *pb->add_signatures() = Gemm(kMlpUp, 4 * h / tp, t, h, "cublasLtMatmul");
  *pb->add_signatures() = Gemm(kDgrad, h, t, 4 * h / tp, "cublasGemmEx");
  *pb->add_signatures() = Gemm(kWgrad, 4 * h / tp, h, t, "cublasGemmEx");
  *pb->add_signatures() = Gemm(kLmHead, h / tp, t, 8512, "cublasGemmEx");
  const uint64_t grad_bytes = l.data_parallel_only() ? 2 * h * h * 2 : 12 * h * h * 2 / tp;
  *pb->add_signatures() = Coll(kGradAllReduce, XPU_OP_ALLREDUCE, grad_bytes, CommId(r, kDpComm),
                               CommRank(r, kDpComm), CommSize(kDpComm), -1, "ncclAllReduce");
  const int32_t tp_size = CommSize(kTpComm);
  if (tp_size > 1) {
    const uint64_t bytes = l.data_parallel_only() ? 8ull << 20 : 2 * t * h;
    *pb->add_signatures() = Coll(kTpAllReduce, XPU_OP_ALLREDUCE, bytes, CommId(r, kTpComm),
                                 CommRank(r, kTpComm), tp_size, -1, "ncclAllReduce");
  }
  if (l.data_parallel_only()) {
    const int32_t n = spec_.ranks;
    const uint64_t gather = (32ull << 20) / static_cast<uint64_t>(n);
    *pb->add_signatures() = Coll(kAllGather, XPU_OP_ALLGATHER, gather, CommId(r, kDpComm), r, n, -1,
                                 "ncclAllGather");
    *pb->add_signatures() = Coll(kReduceScatter, XPU_OP_REDUCESCATTER, gather, CommId(r, kDpComm), r,
                                 n, -1, "ncclReduceScatter");
    *pb->add_signatures() = Coll(kSendNext, XPU_OP_SEND, 16ull << 20, CommId(r, kRingComm), r, n,
                                 (r + 1) % n, "ncclSend");
    *pb->add_signatures() = Coll(kRecvPrev, XPU_OP_RECV, 16ull << 20, CommId(r, kRingComm), r, n,
                                 (r + n - 1) % n, "ncclRecv");
  } else {
    const uint64_t act = 2 * t * h / tp;
    const int32_t stage = CommRank(r, kRingComm), pp = l.pp;
    const uint64_t pipe = CommId(r, kRingComm);
    if (stage + 1 < pp) {
      *pb->add_signatures() =
          Coll(kSendNext, XPU_OP_SEND, act, pipe, stage, pp, stage + 1, "ncclSend");
      *pb->add_signatures() =
          Coll(kRecvNext, XPU_OP_RECV, act, pipe, stage, pp, stage + 1, "ncclRecv");
    }
    if (stage > 0) {
      *pb->add_signatures() =
          Coll(kRecvPrev, XPU_OP_RECV, act, pipe, stage, pp, stage - 1, "ncclRecv");
      *pb->add_signatures() =
          Coll(kSendPrev, XPU_OP_SEND, act, pipe, stage, pp, stage - 1, "ncclSend");
    }
  }
  *pb->add_signatures() = HostSig(kStep, XPU_OP_STEP, "step");
  *pb->add_signatures() = HostSig(kDataLoader, XPU_OP_PY_DATALOADER, "DataLoader.__next__");
  *pb->add_signatures() = HostSig(kGc, XPU_OP_PY_GC, "gc.collect");
  *pb->add_signatures() = HostSig(kSync, XPU_OP_SYNC_STREAM, "cudaStreamSynchronize");
}

void ClusterModel::FillProgress(int32_t r, uint64_t now_ns, uint64_t hang_floor_ns,
                                xpu::v1::HangProgress* p) const {
  const Rank& k = ranks_[static_cast<size_t>(r)];
  const HangRole role = Role(r);
  // A stopped process's hook cannot update its table: it stays as it was.
  const uint64_t updated = role == HangRole::kStopped ? hang_.since_ns : now_ns;
  for (CommSlot slot : {kDpComm, kTpComm}) {
    const int32_t size = CommSize(slot);
    if (size < 2) continue;
    xpu::v1::CommProgress* c = p->add_comms();
    c->set_comm_id(CommId(r, slot));
    c->set_comm_rank(CommRank(r, slot));
    c->set_comm_nranks(size);
    c->set_last_issued_seq(k.coll_seq[slot]);
    c->set_last_completed_seq(k.coll_seq[slot]);
    c->set_updated_ns(updated);
    const bool pending = slot == kDpComm && (role == HangRole::kWaiting ||
                                             role == HangRole::kOtherSize ||
                                             role == HangRole::kLinkFrom);
    if (!pending) continue;
    c->set_last_completed_seq(hang_.seq - 1);
    c->set_pending_seq(hang_.seq);
    c->set_pending_kind(hang_.kind);
    c->set_pending_bytes(role == HangRole::kOtherSize ? hang_.bytes / 2 : hang_.bytes);
    c->set_pending_since_ns(hang_.since_ns);
    c->set_pending_name(hang_.name);
    const bool overdue = now_ns > hang_.since_ns && now_ns - hang_.since_ns > hang_floor_ns;
    c->set_suspect(overdue);
    if (!overdue) continue;
    p->set_suspect(true);
    p->set_suspect_kind(hang_.kind);
    p->set_suspect_seq(hang_.seq);
    p->set_suspect_since_ns(hang_.since_ns);
    p->set_suspect_detected_ns(hang_.since_ns + hang_floor_ns);
    p->set_suspect_threshold_ns(hang_floor_ns);
    p->set_suspect_comm_id(hang_.comm_id);
    p->set_suspects_total(1);
    p->set_suspect_name(hang_.name);
  }
}

}  // namespace xpu::sim
