#include "common/timeline/synthetic_job.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/timeline/rank_dump.h"
#include "xpu/record.h"

namespace xpu::timeline {
namespace {

enum SigIds : uint32_t {
  kSigKernel = 1,
  kSigGemm,
  kSigAllReduce,
  kSigDataLoader,
  kSigStep,
  kSigCallsiteFwd,
  kSigCallsiteBwd,
  kSigCallsiteAr
};
constexpr uint64_t kKernelNs = 20000, kGemmNs = 100000, kGapNs = 5000, kIssueNs = 8000;
constexpr uint64_t kStepGapNs = 200000;  // DataLoader time between steps
constexpr uint64_t kArNs = 300000;       // AllReduce time after the last member arrives

void Add(std::string* packed, uint32_t sig, uint64_t start, uint64_t dur, uint32_t seq,
         uint16_t stream, uint16_t flags, int32_t issue = 0) {
  xpu_record_v1 r{};
  r.sig_id = sig;
  r.start_ns = start;
  r.duration = static_cast<uint32_t>(dur);
  r.issue_latency_ns = issue;
  r.seq = seq;
  r.stream = stream;
  r.flags = flags;
  packed->append(reinterpret_cast<const char*>(&r), sizeof(r));
}

// Uniform in [0, 1) from a key.
double U(uint64_t seed, uint64_t a, uint64_t b) {
  return static_cast<double>(Mix64(seed ^ Mix64(a * 1000003ull + b)) >> 11) / 9007199254740992.0;
}

}  // namespace

size_t SyntheticOpsPerRank(const SyntheticJob& j) {
  return static_cast<size_t>(j.steps) * (2 + 3 * j.layers + 2);
}

int SyntheticStepsFor(const SyntheticJob& j, size_t ops) {
  const size_t per = 2 + 3 * j.layers + 2;
  return static_cast<int>((ops + per - 1) / per);
}

std::string SyntheticHost(int host) { return absl::StrCat("node", host); }

xpu::v1::ProcessBatch SyntheticRank(const SyntheticJob& j, int rank) {
  xpu::v1::ProcessBatch pb;
  const int host = rank / (j.ranks_per_host > 0 ? j.ranks_per_host : 1);
  const int64_t off =
      host < static_cast<int>(j.host_offsets_ns.size()) ? j.host_offsets_ns[host] : 0;
  pb.set_process_key(static_cast<uint64_t>(rank) + 1);
  pb.set_exited(rank == j.exited_rank);
  auto* id = pb.mutable_identity();
  id->set_job(j.job);
  id->set_host(SyntheticHost(host));
  id->set_pid(10000 + rank);
  id->set_rank(rank);
  id->set_local_rank(rank % (j.ranks_per_host > 0 ? j.ranks_per_host : 1));
  id->set_world_size(j.ranks);
  auto sig = [&](uint32_t sid, uint32_t kind, const std::string& name) {
    xpu::v1::Signature* s = pb.add_signatures();
    s->set_id(sid);
    s->set_kind(kind);
    s->set_name(name);
    s->set_comm_rank(-1);
    s->set_peer(-1);
    return s;
  };
  sig(kSigKernel, XPU_OP_KERNEL, "layernorm_fwd_kernel");
  xpu::v1::Signature* g = sig(kSigGemm, XPU_OP_GEMM, "cublasGemmEx");
  g->set_m(4096);
  g->set_n(2048);
  g->set_k(1024);
  g->set_batch(1);
  g->set_dtype(XPU_DT_BF16);
  xpu::v1::Signature* ar = sig(kSigAllReduce, XPU_OP_ALLREDUCE, "ncclAllReduce");
  ar->set_dtype(XPU_DT_BF16);
  ar->set_count(16u << 20);
  ar->set_comm_id(kWorldComm);
  ar->set_comm_rank(rank);
  ar->set_comm_nranks(j.ranks);
  sig(kSigDataLoader, XPU_OP_PY_DATALOADER, "__next__");
  sig(kSigStep, XPU_OP_STEP, "step");
  // Python call stacks, as the hook interns them (record.h XPU_OP_PY_CALLSITE).
  sig(kSigCallsiteFwd, XPU_OP_PY_CALLSITE,
      "forward@/src/model.py:120;train_step@/src/train.py:42;main@/src/train.py:300")
      ->set_peer(0);
  sig(kSigCallsiteBwd, XPU_OP_PY_CALLSITE,
      "backward@/src/model.py:160;train_step@/src/train.py:47;main@/src/train.py:300")
      ->set_peer(0);
  sig(kSigCallsiteAr, XPU_OP_PY_CALLSITE,
      "allreduce_grads@/src/ddp.py:88;train_step@/src/train.py:49;main@/src/train.py:300")
      ->set_peer(0);

  std::string packed;
  packed.reserve(SyntheticOpsPerRank(j) * sizeof(xpu_record_v1));
  const uint16_t kCompute = 7, kComm = 9, kThread = 1;
  const uint16_t gpu = XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
  uint32_t stream_seq = 0;
  // True time of the step start, equal on all ranks.
  const uint64_t step_len =
      kStepGapNs + j.layers * (kKernelNs + kGemmNs + 2 * kGapNs) + 60000 + kArNs + 50000;
  for (int s = 0; s < j.steps; ++s) {
    const uint64_t t_step = j.t0_ns + s * step_len;
    auto local = [&](uint64_t t) { return static_cast<uint64_t>(static_cast<int64_t>(t) + off); };
    Add(&packed, kSigDataLoader, local(t_step), kStepGapNs - 10000, 0, kThread, XPU_REC_HOST);
    Add(&packed, kSigStep, local(t_step + kStepGapNs), 0, static_cast<uint32_t>(s), kThread,
        XPU_REC_HOST);
    uint64_t t = t_step + kStepGapNs + kGapNs;
    for (int l = 0; l < j.layers; ++l) {
      Add(&packed, kSigKernel, local(t), kKernelNs, ++stream_seq, kCompute, gpu, kIssueNs);
      t += kKernelNs + kGapNs;
      const uint32_t gseq = ++stream_seq;
      Add(&packed, kSigGemm, local(t), kGemmNs, gseq, kCompute, gpu, kIssueNs);
      // Call-site link of the launch (at the CPU launch time t - issue):
      // the launch's sig_id in issue_latency_ns, its seq and stream.
      Add(&packed, l % 2 == 0 ? kSigCallsiteFwd : kSigCallsiteBwd, local(t - kIssueNs), 0, gseq,
          kCompute, XPU_REC_HOST, kSigGemm);
      t += kGemmNs + kGapNs;
    }
    // AllReduce: members arrive up to 60 us apart, all end at the same true
    // time (plus jitter, rare outliers).
    const uint64_t arrive = t + static_cast<uint64_t>(60000 * U(j.seed, rank, s));
    const uint64_t last_arrival = t + 60000;
    int64_t end = static_cast<int64_t>(last_arrival + kArNs);
    end += static_cast<int64_t>((2 * U(j.seed + 1, rank, s) - 1) *
                                static_cast<double>(j.end_jitter_ns));
    if (U(j.seed + 2, rank, s) < j.outlier_fraction) end += 300000;
    Add(&packed, kSigAllReduce, local(arrive), static_cast<uint64_t>(end) - arrive,
        static_cast<uint32_t>(s + 1), kComm, gpu, kIssueNs);
    Add(&packed, kSigCallsiteAr, local(arrive - kIssueNs), 0, static_cast<uint32_t>(s + 1), kComm,
        XPU_REC_HOST, kSigAllReduce);
  }
  pb.set_records(std::move(packed));
  return pb;
}

}  // namespace xpu::timeline
