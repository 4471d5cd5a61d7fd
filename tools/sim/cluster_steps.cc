// tools/sim/cluster_steps.cc — the step programs of ClusterModel (see
// cluster_model.h): what every rank does in one training step, per layout.
#include <algorithm>

#include "tools/sim/cluster_model.h"
#include "xpu/formulas.h"

namespace xpu::sim {
namespace {

double Flops(uint64_t m, uint64_t n, uint64_t k) { return 2.0 * m * n * k; }

}  // namespace

void ClusterModel::RunWindow(int w, uint64_t start_ns) {
  window_ = w;
  ActivateFaults(w);
  for (Rank& k : ranks_) {
    k.out.clear();
    k.step_ends.clear();
    k.cpu = std::max(k.cpu, start_ns);
    k.compute_free = std::max(k.compute_free, start_ns);
    k.comm_free = std::max(k.comm_free, start_ns);
  }
  if (hang_.active) return;  // nobody writes records any more
  bool hang_window = false;
  for (const FaultSpec& f : spec_.faults) hang_window |= IsHangFault(f.kind) && f.at_window <= w;
  for (int i = 0; i < spec_.steps_per_window; ++i) {
    const bool hang_now = hang_window && i == 0;
    if (spec_.layout.data_parallel_only()) {
      StepDataParallel(hang_now);
    } else {
      StepPipeline(hang_now);
    }
    for (Rank& k : ranks_) k.step_ends.push_back(static_cast<uint32_t>(k.out.size()));
    if (hang_now) break;
    ++steps_done_;
  }
  for (const Rank& k : ranks_) {
    records_emitted_ += k.out.size();
    clock_ns_ = std::max({clock_ns_, k.cpu, k.compute_free, k.comm_free});
  }
  last_span_ns_ = clock_ns_ > start_ns ? clock_ns_ - start_ns : 0;
}

void ClusterModel::StepDataParallel(bool hang_now) {
  const uint64_t h = Hidden();
  const int32_t n = spec_.ranks;
  for (int32_t r = 0; r < n; ++r) StartStep(r);
  for (int l = 0; l < spec_.layers; ++l) {
    for (int32_t r = 0; r < n; ++r) {
      GcPause(r);
      Compute(r, kNumSigs, static_cast<uint64_t>(40000 * Jitter()), 0, false);  // layernorm
      Compute(r, kQkv, GemmNs(r, Flops(3 * h, kTokens, h)), 0, true);
      Compute(r, kNumSigs, static_cast<uint64_t>(50000 * Jitter()), 0, false);  // attention misc
      Compute(r, kMlpUp, GemmNs(r, Flops(4 * h, kTokens, h)), 0, true);
      Compute(r, kNumSigs, static_cast<uint64_t>(60000 * Jitter()), 0, false);  // gelu
      if (Has(r, FaultKind::kSync)) SyncStream(r);
    }
  }
  for (int32_t r = 0; r < n; ++r) Compute(r, kLmHead, GemmNs(r, Flops(h, kTokens, 8512)), 0, true);
  const int32_t per_host = spec_.ranks_per_host;
  if (per_host > 1) {
    for (int32_t first = 0; first < n; first += per_host) {
      const std::vector<int32_t> members = TpGroupOf(first);
      if (members.size() < 2) continue;
      Collective(kTpAllReduce, kTpComm, members,
                 static_cast<uint64_t>((8ull << 20) * xpu_busbw_factor(
                                                         XPU_OP_ALLREDUCE,
                                                         static_cast<int>(members.size()))),
                 kNodeBusBw);
    }
  }
  const uint64_t grad_bytes = 2ull * h * h * 2;
  for (int l = spec_.layers - 1; l >= 0; --l) {
    for (int32_t r = 0; r < n; ++r) {
      GcPause(r);
      // GEMMs running while a gradient all-reduce is in flight are slowed
      // by contention (the analyses exclude them).
      const Rank& k = ranks_[static_cast<size_t>(r)];
      const double contention = k.comm_free > k.cpu ? 1.15 : 1.0;
      Compute(r, kDgrad,
              static_cast<uint64_t>(static_cast<double>(GemmNs(r, Flops(h, kTokens, 4 * h))) *
                                    contention),
              0, true);
      Compute(r, kWgrad,
              static_cast<uint64_t>(static_cast<double>(GemmNs(r, Flops(4 * h, h, kTokens))) *
                                    contention),
              0, true);
    }
    if (hang_now) {
      HangAt(kDpComm, kGradAllReduce, world_, grad_bytes);
      return;
    }
    Collective(kGradAllReduce, kDpComm, world_,
               static_cast<uint64_t>(static_cast<double>(grad_bytes) *
                                     xpu_busbw_factor(XPU_OP_ALLREDUCE, n)),
               kWorldBusBw);
  }
  const uint64_t gather = 32ull << 20;
  Collective(kAllGather, kDpComm, world_,
             static_cast<uint64_t>(static_cast<double>(gather) *
                                   xpu_busbw_factor(XPU_OP_ALLGATHER, n)),
             kWorldBusBw);
  Collective(kReduceScatter, kDpComm, world_,
             static_cast<uint64_t>(static_cast<double>(gather) *
                                   xpu_busbw_factor(XPU_OP_REDUCESCATTER, n)),
             kWorldBusBw);
  RingExchange(16ull << 20);
  for (int32_t r = 0; r < n; ++r) Optimizer(r);
}

void ClusterModel::RingExchange(uint64_t bytes) {
  const int32_t n = spec_.ranks;
  thread_local std::vector<uint64_t> ready, launch, link_end;
  ready.resize(static_cast<size_t>(n));
  launch.resize(static_cast<size_t>(n));
  link_end.resize(static_cast<size_t>(n));
  for (int32_t r = 0; r < n; ++r) {
    Rank& k = ranks_[static_cast<size_t>(r)];
    k.cpu += kLaunchNs;
    launch[r] = k.cpu;
    ready[r] = std::max({k.cpu, k.comm_free, k.compute_free});
  }
  // Link r -> r+1 starts when both ends are ready.
  for (int32_t r = 0; r < n; ++r) {
    const int32_t dst = (r + 1) % n;
    link_end[r] = std::max(ready[r], ready[dst]) + static_cast<uint64_t>(LinkNs(r, dst, bytes));
  }
  for (int32_t r = 0; r < n; ++r) {
    Rank& k = ranks_[static_cast<size_t>(r)];
    const int32_t src = (r + n - 1) % n;
    Emit(r, kSendNext, launch[r], ready[r], link_end[r] - ready[r], 2, ++k.coll_seq[kRingComm],
         kCollectiveOp);
    Emit(r, kRecvPrev, launch[r], ready[r], link_end[src] - ready[r], 2,
         ++k.coll_seq[kRingComm], kCollectiveOp);
    k.comm_free = std::max({k.comm_free, link_end[r], link_end[src]});
  }
}

void ClusterModel::StageTpAllReduce(int32_t stage) {
  const Layout& l = spec_.layout;
  const int32_t per_stage = l.tp * dp_;
  if (l.tp < 2) return;
  const uint64_t bytes = 2ull * kTokens * Hidden();
  for (int32_t first = stage * per_stage; first < (stage + 1) * per_stage; first += l.tp) {
    Collective(kTpAllReduce, kTpComm, TpGroupOf(first),
               static_cast<uint64_t>(static_cast<double>(bytes) *
                                     xpu_busbw_factor(XPU_OP_ALLREDUCE, l.tp)),
               kNodeBusBw);
  }
}

void ClusterModel::PipelineForward(int32_t stage) {
  const Layout& l = spec_.layout;
  const uint64_t h = Hidden();
  const int32_t per_stage = l.tp * dp_;
  const int32_t first = stage * per_stage, last = first + per_stage;
  const int lps = std::max(1, spec_.layers / l.pp);
  const int mbs = std::max(1, spec_.microbatches);
  const uint64_t act_bytes = 2ull * kTokens * h / static_cast<uint64_t>(l.tp);
  for (int m = 0; m < mbs; ++m) {
    for (int32_t r = first; r < last; ++r) {
      uint64_t dep = 0;
      if (stage > 0) {
        const int32_t src = r - per_stage;
        dep = Receive(src, r, kRecvPrev, act_bytes,
                      act_ready_[static_cast<size_t>(src) * mbs + static_cast<size_t>(m)]);
      }
      ranks_[static_cast<size_t>(r)].compute_free =
          std::max(ranks_[static_cast<size_t>(r)].compute_free, dep);
    }
    for (int layer = 0; layer < lps; ++layer) {
      for (int32_t r = first; r < last; ++r) {
        GcPause(r);
        Compute(r, kNumSigs, static_cast<uint64_t>(40000 * Jitter()), 0, false);
        Compute(r, kQkv, GemmNs(r, Flops(3 * h / l.tp, kTokens, h)), 0, true);
      }
      StageTpAllReduce(stage);
      for (int32_t r = first; r < last; ++r) {
        Compute(r, kMlpUp, GemmNs(r, Flops(4 * h / l.tp, kTokens, h)), 0, true);
        Compute(r, kNumSigs, static_cast<uint64_t>(60000 * Jitter()), 0, false);
        if (Has(r, FaultKind::kSync)) SyncStream(r);
      }
      StageTpAllReduce(stage);
    }
    for (int32_t r = first; r < last; ++r) {
      if (stage == l.pp - 1) {
        Compute(r, kLmHead, GemmNs(r, Flops(h / l.tp, kTokens, 8512)), 0, true);
      } else {
        act_ready_[static_cast<size_t>(r) * mbs + static_cast<size_t>(m)] =
            PostSend(r, r + per_stage, kSendNext, act_bytes);
      }
    }
  }
}

void ClusterModel::PipelineBackward(int32_t stage) {
  const Layout& l = spec_.layout;
  const uint64_t h = Hidden();
  const int32_t per_stage = l.tp * dp_;
  const int32_t first = stage * per_stage, last = first + per_stage;
  const int lps = std::max(1, spec_.layers / l.pp);
  const int mbs = std::max(1, spec_.microbatches);
  const uint64_t act_bytes = 2ull * kTokens * h / static_cast<uint64_t>(l.tp);
  const size_t back = static_cast<size_t>(spec_.ranks) * static_cast<size_t>(mbs);
  for (int m = 0; m < mbs; ++m) {
    for (int32_t r = first; r < last; ++r) {
      if (stage == l.pp - 1) continue;
      const int32_t src = r + per_stage;
      const uint64_t dep = Receive(
          src, r, kRecvNext, act_bytes,
          act_ready_[back + static_cast<size_t>(src) * mbs + static_cast<size_t>(m)]);
      ranks_[static_cast<size_t>(r)].compute_free =
          std::max(ranks_[static_cast<size_t>(r)].compute_free, dep);
    }
    for (int layer = lps - 1; layer >= 0; --layer) {
      for (int32_t r = first; r < last; ++r) {
        GcPause(r);
        Compute(r, kDgrad, GemmNs(r, Flops(h, kTokens, 4 * h / l.tp)), 0, true);
        Compute(r, kWgrad, GemmNs(r, Flops(4 * h / l.tp, h, kTokens)), 0, true);
      }
      StageTpAllReduce(stage);
    }
    if (stage == 0) continue;
    for (int32_t r = first; r < last; ++r) {
      act_ready_[back + static_cast<size_t>(r) * mbs + static_cast<size_t>(m)] =
          PostSend(r, r - per_stage, kSendPrev, act_bytes);
    }
  }
}

void ClusterModel::StepPipeline(bool hang_now) {
  const Layout& l = spec_.layout;
  const int32_t n = spec_.ranks;
  for (int32_t r = 0; r < n; ++r) StartStep(r);
  for (int32_t s = 0; s < l.pp; ++s) PipelineForward(s);
  for (int32_t s = l.pp - 1; s >= 0; --s) PipelineBackward(s);
  const uint64_t h = Hidden();
  const uint64_t grad_bytes = 12ull * h * h * 2 / static_cast<uint64_t>(l.tp);
  if (hang_now) {
    int32_t culprit = 0;
    for (const FaultSpec& f : spec_.faults) {
      if (IsHangFault(f.kind) && f.at_window <= window_) {
        culprit = f.ranks.front();
        break;
      }
    }
    HangAt(kDpComm, kGradAllReduce, DpGroupOf(culprit), grad_bytes);
    return;
  }
  const int lps = std::max(1, spec_.layers / l.pp);
  for (int layer = 0; layer < lps; ++layer) {
    for (int32_t s = 0; s < l.pp; ++s) {
      for (int32_t tp_i = 0; tp_i < l.tp; ++tp_i) {
        Collective(kGradAllReduce, kDpComm, DpGroupOf(tp_i + l.tp * dp_ * s),
                   static_cast<uint64_t>(static_cast<double>(grad_bytes) *
                                         xpu_busbw_factor(XPU_OP_ALLREDUCE, dp_)),
                   kWorldBusBw);
      }
    }
  }
  for (int32_t r = 0; r < n; ++r) Optimizer(r);
}

}  // namespace xpu::sim
