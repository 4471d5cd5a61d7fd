#include "tests/scenarios/synthetic_job.h"

#include <algorithm>

#include "engine/state/batch_builder.h"
#include "xpu/formulas.h"

namespace xpu::scenarios {
namespace {

constexpr uint32_t kH = 4096;            // hidden
constexpr uint32_t kT = 4096;            // tokens per step and rank
constexpr double kEfficiency = 0.8;      // well-shaped GEMMs
constexpr double kBadEfficiency = 0.35;  // misaligned LM head
constexpr double kLaunchNs = 8000;       // host cost of one launch
constexpr double kWorldBusBw = 100e9;    // bytes/s, inter-node collectives
constexpr double kNodeBusBw = 300e9;     // intra-node
constexpr double kLinkBw = 50e9;         // ring point-to-point
constexpr uint64_t kWorldComm = 0x1000;
constexpr uint64_t kRingComm = 0x2000;
constexpr uint64_t kTpCommBase = 0x3000;  // + host index
constexpr uint64_t kGradBytes = 2ull * kH * kH * 2;
constexpr uint64_t kGatherBytes = 32ull << 20;
constexpr uint64_t kTpBytes = 8ull << 20;
constexpr uint64_t kP2pBytes = 16ull << 20;

double Flops(uint32_t m, uint32_t n, uint32_t k) { return 2.0 * m * n * k; }

}  // namespace

SyntheticJob::SyntheticJob(SyntheticJobSpec spec, uint64_t start_ns)
    : spec_(std::move(spec)), ranks_(spec_.ranks), rng_(spec_.seed) {
  for (Rank& r : ranks_) r.cpu = r.compute_free = r.comm_free = start_ns;
}

std::string SyntheticJob::HostOf(int rank) const {
  return "node" + std::to_string(rank / std::max(1, spec_.ranks_per_host));
}

double SyntheticJob::Jitter() {
  std::uniform_real_distribution<double> d(0.98, 1.02);
  return d(rng_);
}

uint64_t SyntheticJob::GemmNs(int r, double flops, double efficiency) {
  double ns = flops / (spec_.peak_tflops * 1e12 * efficiency) * 1e9 * Jitter();
  if (Active() && spec_.fault.slow_gpu_ranks.count(r)) ns *= spec_.fault.slow_gpu_factor;
  if (Active() && spec_.fault.shared_gpu_ranks.count(r)) {
    std::uniform_real_distribution<double> d(0, 1);
    if (d(rng_) < spec_.fault.shared_gpu_share) ns *= spec_.fault.shared_gpu_factor;
  }
  return static_cast<uint64_t>(ns);
}

void SyntheticJob::Launch(int r, Sig sig, uint64_t dur_ns, bool comm_stream, uint64_t dep_ns,
                          bool traced) {
  Rank& k = ranks_[r];
  k.cpu += static_cast<uint64_t>(kLaunchNs);
  const uint64_t launch = k.cpu;
  uint64_t& free = comm_stream ? k.comm_free : k.compute_free;
  const uint64_t start = std::max({launch, free, dep_ns});
  free = start + dur_ns;
  if (!traced) return;
  xpu_record_v1 rec = engine::MakeRecord(sig, start, static_cast<uint32_t>(dur_ns),
                                         comm_stream ? ++k.comm_seq : ++k.compute_seq,
                                         XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
  rec.issue_latency_ns = static_cast<int32_t>(std::min<uint64_t>(start - launch, INT32_MAX));
  rec.stream = comm_stream ? 2 : 1;
  k.out.push_back(rec);
}

void SyntheticJob::Host(int r, Sig sig, uint64_t dur_ns, uint32_t seq) {
  Rank& k = ranks_[r];
  xpu_record_v1 rec =
      engine::MakeRecord(sig, k.cpu, static_cast<uint32_t>(dur_ns), seq, XPU_REC_HOST);
  rec.stream = 0;
  k.out.push_back(rec);
  k.cpu += dur_ns;
}

void SyntheticJob::Sync(int r) {
  Rank& k = ranks_[r];
  const uint64_t done = std::max({k.cpu, k.compute_free, k.comm_free});
  xpu_record_v1 rec =
      engine::MakeRecord(kSync, k.cpu, static_cast<uint32_t>(done - k.cpu), 0, XPU_REC_HOST);
  k.out.push_back(rec);
  k.cpu = done;
}

void SyntheticJob::Collective(Sig sig, const std::vector<int>& members, uint64_t comm_id,
                              uint64_t bus_bytes) {
  std::vector<uint64_t> ready(members.size());
  uint64_t last = 0;
  bool slow = false;
  for (size_t i = 0; i < members.size(); ++i) {
    Rank& k = ranks_[members[i]];
    k.cpu += static_cast<uint64_t>(kLaunchNs);
    // The comm stream waits for the gradients (compute stream) of this rank.
    ready[i] = std::max({k.cpu, k.comm_free, k.compute_free});
    last = std::max(last, ready[i]);
    slow |= Active() && spec_.fault.slow_link_ranks.count(members[i]) > 0;
  }
  const bool intra = comm_id >= kTpCommBase;
  double ns = static_cast<double>(bus_bytes) / (intra ? kNodeBusBw : kWorldBusBw) * 1e9 * Jitter();
  if (slow) ns *= spec_.fault.slow_link_factor;
  const uint64_t end = last + static_cast<uint64_t>(ns);
  for (size_t i = 0; i < members.size(); ++i) {
    Rank& k = ranks_[members[i]];
    const uint64_t launch = k.cpu;
    xpu_record_v1 rec =
        engine::MakeRecord(sig, ready[i], static_cast<uint32_t>(end - ready[i]),
                           ++k.coll_seq[comm_id], XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
    rec.issue_latency_ns = static_cast<int32_t>(ready[i] - launch);
    rec.stream = 2;
    k.out.push_back(rec);
    k.comm_free = end;
  }
}

void SyntheticJob::RingP2p(uint64_t bytes) {
  const int n = spec_.ranks;
  std::vector<uint64_t> ready(n), launch(n);
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    k.cpu += static_cast<uint64_t>(kLaunchNs);
    launch[r] = k.cpu;
    ready[r] = std::max({k.cpu, k.comm_free, k.compute_free});
  }
  // Link r -> r+1 starts when both ends are ready.
  std::vector<uint64_t> link_end(n);
  for (int r = 0; r < n; ++r) {
    const int dst = (r + 1) % n;
    double ns = static_cast<double>(bytes) / kLinkBw * 1e9 * Jitter();
    if (Active() &&
        (spec_.fault.slow_link_ranks.count(r) || spec_.fault.slow_link_ranks.count(dst))) {
      ns *= spec_.fault.slow_link_factor;
    }
    link_end[r] = std::max(ready[r], ready[dst]) + static_cast<uint64_t>(ns);
  }
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks_[r];
    const int src = (r + n - 1) % n;
    const uint32_t seq = ++k.coll_seq[kRingComm];
    xpu_record_v1 s =
        engine::MakeRecord(kSend, ready[r], static_cast<uint32_t>(link_end[r] - ready[r]), seq,
                           XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
    s.issue_latency_ns = static_cast<int32_t>(ready[r] - launch[r]);
    s.stream = 2;
    xpu_record_v1 v =
        engine::MakeRecord(kRecv, ready[r], static_cast<uint32_t>(link_end[src] - ready[r]),
                           ++k.coll_seq[kRingComm], XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
    v.issue_latency_ns = s.issue_latency_ns;
    v.stream = 2;
    k.out.push_back(s);
    k.out.push_back(v);
    k.comm_free = std::max({k.comm_free, link_end[r], link_end[src]});
  }
}

void SyntheticJob::Step() {
  const ScenarioFault& f = spec_.fault;
  const bool active = Active();
  const int n = spec_.ranks;
  for (int r = 0; r < n; ++r) {
    if (spec_.step_markers) Host(r, kStep, 0, static_cast<uint32_t>(step_ + 1));
    double dl_ms = active && f.dataloader_ranks.count(r) ? f.dataloader_ms : 0.5;
    Host(r, kDataLoader, static_cast<uint64_t>(dl_ms * 1e6 * Jitter()));
  }
  auto gc = [&](int r) {
    if (active && f.gc_ranks.count(r) && f.gc_ms_per_layer > 0) {
      Host(r, kGc, static_cast<uint64_t>(f.gc_ms_per_layer * 1e6 * Jitter()), 1000);
    }
  };
  for (int l = 0; l < spec_.layers; ++l) {
    for (int r = 0; r < n; ++r) {
      gc(r);
      Launch(r, kLayerNorm, static_cast<uint64_t>(40000 * Jitter()), false);
      Launch(r, kQkv, GemmNs(r, Flops(3 * kH, kT, kH), kEfficiency), false);
      double minority_us = active && f.minority_ranks.count(r) ? f.minority_us : 50;
      Launch(r, kGelu, static_cast<uint64_t>(minority_us * 1000 * Jitter()), false, 0,
             /*traced=*/false);
      Launch(r, kMlpUp, GemmNs(r, Flops(4 * kH, kT, kH), kEfficiency), false);
      Launch(r, kGelu, static_cast<uint64_t>(60000 * Jitter()), false);
      if (active && f.sync_ranks.count(r)) {
        Sync(r);
        ranks_[r].cpu += static_cast<uint64_t>(f.sync_host_us * 1000);  // untraced host work
      }
    }
  }
  // LM head at the end of the forward.
  for (int r = 0; r < n; ++r) {
    const uint32_t k = f.bad_gemm ? 8484 : 8512;
    Launch(r, kLmHead, GemmNs(r, Flops(kH, kT, k), f.bad_gemm ? kBadEfficiency : kEfficiency),
           false);
  }
  // Tensor-parallel all-reduce per host, once per step after the forward.
  const int per_host = std::max(1, spec_.ranks_per_host);
  for (int h = 0; h * per_host < n; ++h) {
    std::vector<int> members;
    for (int r = h * per_host; r < std::min(n, (h + 1) * per_host); ++r) members.push_back(r);
    if (members.size() > 1) {
      Collective(
          kTpAllReduce, members, kTpCommBase + h,
          static_cast<uint64_t>(
              kTpBytes * xpu_busbw_factor(XPU_OP_ALLREDUCE, static_cast<int>(members.size()))));
    }
  }
  std::vector<int> world(n);
  for (int r = 0; r < n; ++r) world[r] = r;
  for (int l = spec_.layers - 1; l >= 0; --l) {
    for (int r = 0; r < n; ++r) {
      gc(r);
      // GEMMs running while a gradient all-reduce is in flight are slowed
      // by contention (the analysis excludes them).
      const double contention = ranks_[r].comm_free > ranks_[r].cpu ? 1.15 : 1.0;
      Launch(r, kDgrad,
             static_cast<uint64_t>(GemmNs(r, Flops(kH, kT, 4 * kH), kEfficiency) * contention),
             false);
      Launch(r, kWgrad,
             static_cast<uint64_t>(GemmNs(r, Flops(4 * kH, kH, kT), kEfficiency) * contention),
             false);
    }
    Collective(kGradAllReduce, world, kWorldComm,
               static_cast<uint64_t>(kGradBytes * xpu_busbw_factor(XPU_OP_ALLREDUCE, n)));
  }
  Collective(kAllGather, world, kWorldComm,
             static_cast<uint64_t>(kGatherBytes * xpu_busbw_factor(XPU_OP_ALLGATHER, n)));
  Collective(kReduceScatter, world, kWorldComm,
             static_cast<uint64_t>(kGatherBytes * xpu_busbw_factor(XPU_OP_REDUCESCATTER, n)));
  RingP2p(kP2pBytes);
  for (int r = 0; r < n; ++r) {
    Launch(r, kOptimizer, static_cast<uint64_t>(300000 * Jitter()), false, ranks_[r].comm_free);
    Sync(r);
  }
  ++step_;
}

void SyntheticJob::AddSignatures(int r, xpu::v1::ProcessBatch* pb) const {
  const int n = spec_.ranks;
  const int per_host = std::max(1, spec_.ranks_per_host);
  const int host = r / per_host;
  const int tp_size = std::min(n, (host + 1) * per_host) - host * per_host;
  auto gemm = [&](uint32_t id, uint32_t m, uint32_t nn, uint32_t k, const char* name) {
    xpu::v1::Signature s = engine::MakeGemmSignature(id, m, nn, k);
    s.set_name(name);
    *pb->add_signatures() = s;
  };
  *pb->add_signatures() = engine::MakeKernelSignature(kLayerNorm, "layernorm_kernel");
  *pb->add_signatures() = engine::MakeKernelSignature(kGelu, "gelu_kernel");
  *pb->add_signatures() = engine::MakeKernelSignature(kOptimizer, "adam_kernel");
  gemm(kQkv, 3 * kH, kT, kH, "cublasGemmEx");
  gemm(kMlpUp, 4 * kH, kT, kH, "cublasLtMatmul");
  gemm(kDgrad, kH, kT, 4 * kH, "cublasGemmEx");
  gemm(kWgrad, 4 * kH, kH, kT, "cublasGemmEx");
  gemm(kLmHead, kH, kT, spec_.fault.bad_gemm ? 8484 : 8512, "cublasGemmEx");
  const uint64_t grad_count = kGradBytes / 2, gather_count = kGatherBytes / 2 / n;
  *pb->add_signatures() = engine::MakeCollectiveSignature(
      kGradAllReduce, XPU_OP_ALLREDUCE, grad_count, XPU_DT_BF16, kWorldComm, r, n);
  *pb->add_signatures() = engine::MakeCollectiveSignature(
      kAllGather, XPU_OP_ALLGATHER, gather_count, XPU_DT_BF16, kWorldComm, r, n);
  *pb->add_signatures() = engine::MakeCollectiveSignature(
      kReduceScatter, XPU_OP_REDUCESCATTER, gather_count, XPU_DT_BF16, kWorldComm, r, n);
  *pb->add_signatures() =
      engine::MakeCollectiveSignature(kTpAllReduce, XPU_OP_ALLREDUCE, kTpBytes / 2, XPU_DT_BF16,
                                      kTpCommBase + host, r - host * per_host, tp_size);
  xpu::v1::Signature send = engine::MakeCollectiveSignature(kSend, XPU_OP_SEND, kP2pBytes / 2,
                                                            XPU_DT_BF16, kRingComm, r, n);
  send.set_peer((r + 1) % n);
  *pb->add_signatures() = send;
  xpu::v1::Signature recv = engine::MakeCollectiveSignature(kRecv, XPU_OP_RECV, kP2pBytes / 2,
                                                            XPU_DT_BF16, kRingComm, r, n);
  recv.set_peer((r + n - 1) % n);
  *pb->add_signatures() = recv;
  xpu::v1::Signature host_sig;
  host_sig.set_comm_rank(-1);
  host_sig.set_peer(-1);
  for (auto [id, kind, name] :
       {std::tuple<uint32_t, uint32_t, const char*>{kStep, XPU_OP_STEP, "step"},
        {kDataLoader, XPU_OP_PY_DATALOADER, "DataLoader.__next__"},
        {kGc, XPU_OP_PY_GC, "gc.collect"},
        {kSync, XPU_OP_SYNC_STREAM, "cudaStreamSynchronize"}}) {
    host_sig.set_id(id);
    host_sig.set_kind(kind);
    host_sig.set_name(name);
    *pb->add_signatures() = host_sig;
  }
}

xpu::v1::Batch SyntheticJob::NextWindow(int steps) {
  for (int i = 0; i < steps; ++i) Step();
  xpu::v1::Batch b;
  for (int r = 0; r < spec_.ranks; ++r) {
    Rank& k = ranks_[r];
    xpu::v1::ProcessBatch* pb = b.add_processes();
    engine::SetIdentity(pb, spec_.job, r, HostOf(r), 10000 + r);
    pb->mutable_identity()->set_job_name(spec_.job_name);
    pb->mutable_identity()->set_world_size(spec_.ranks);
    pb->mutable_identity()->set_gpu_model(spec_.gpu_model);
    if (!k.sigs_sent) {
      AddSignatures(r, pb);
      k.sigs_sent = true;
    }
    engine::AppendRecords(pb, k.out);
    records_emitted_ += k.out.size();
    k.out.clear();
  }
  return b;
}

}  // namespace xpu::scenarios
