#include "tools/sim/cluster_model.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "xpu/formulas.h"

namespace xpu::sim {
namespace {

// The modelled accelerator and network.
constexpr double kPeakTflops = 400;
constexpr double kEfficiency = 0.8;    // well-shaped GEMMs

// Faults, as in tests/scenarios.
constexpr double kSlowGpuFactor = 2.0;
constexpr double kSlowLinkFactor = 3.0;
constexpr double kGcMsPerLayer = 6;
constexpr double kDataLoaderMs = 0.5;
constexpr double kSlowDataLoaderMs = 15;

// Communicator ids.
constexpr uint64_t kWorldComm = 0x1000;
constexpr uint64_t kRingComm = 0x2000;
constexpr uint64_t kHostTpCommBase = 0x3000;
constexpr uint64_t kTpCommBase = 0x10000000;
constexpr uint64_t kDpCommBase = 0x20000000;
constexpr uint64_t kPipeCommBase = 0x30000000;

// The hook's default sampler (XPU_SAMPLE_FIRST, XPU_SAMPLE_EVERY).
constexpr uint32_t kSampleFirst = 32;
constexpr uint32_t kSampleEvery = 16;

void SetDuration(xpu_record_v1* r, uint64_t ns) {
  if (ns <= UINT32_MAX) {
    r->duration = static_cast<uint32_t>(ns);
    return;
  }
  uint64_t us = ns / 1000;
  r->flags |= XPU_REC_DUR_US;
  if (us > UINT32_MAX) {
    us = UINT32_MAX;
    r->flags |= XPU_REC_DUR_SATURATED;
  }
  r->duration = static_cast<uint32_t>(us);
}

}  // namespace

absl::StatusOr<Layout> ParseLayout(std::string_view view, int32_t ranks, int32_t ranks_per_host) {
  const std::string text(view);
  Layout l;
  l.name = text;
  if (text != "dp") {
    const size_t pp_at = text.find("pp");
    if (text.compare(0, 2, "tp") != 0 || pp_at == std::string::npos ||
        !absl::SimpleAtoi(text.substr(2, pp_at - 2), &l.tp) ||
        !absl::SimpleAtoi(text.substr(pp_at + 2), &l.pp) || l.tp < 1 || l.pp < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--layout '", text, "': expected dp or tpXppY (e.g. tp8pp4)"));
    }
    if (l.tp > ranks_per_host || ranks_per_host % l.tp != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--layout ", text, ": a tensor-parallel group of ", l.tp,
          " must fit in a host and divide --ranks-per-host ", ranks_per_host));
    }
    if (ranks % (l.tp * l.pp) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("--layout ", text, ": --ranks ", ranks,
                                                     " is not a multiple of tp x pp = ",
                                                     l.tp * l.pp));
    }
    if (l.tp == 1 && l.pp == 1) l.name = "dp";
  }
  return l;
}

ClusterModel::ClusterModel(ModelSpec spec)
    : spec_(std::move(spec)),
      ranks_(static_cast<size_t>(spec_.ranks)),
      world_(static_cast<size_t>(spec_.ranks)),
      active_(static_cast<size_t>(spec_.ranks), 0),
      roles_(static_cast<size_t>(spec_.ranks), HangRole::kNone),
      rng_(0x9E3779B97F4A7C15ull ^ spec_.seed) {
  hosts_ = (spec_.ranks + spec_.ranks_per_host - 1) / spec_.ranks_per_host;
  dp_ = spec_.ranks / (spec_.layout.tp * spec_.layout.pp);
  for (int32_t r = 0; r < spec_.ranks; ++r) world_[static_cast<size_t>(r)] = r;
  if (!spec_.layout.data_parallel_only()) {
    act_ready_.assign(2ull * static_cast<size_t>(spec_.ranks) *
                          static_cast<size_t>(std::max(1, spec_.microbatches)),
                      0);
  }
}

std::string ClusterModel::HostName(int32_t host) const {
  char buf[32];
  snprintf(buf, sizeof(buf), "sim-node%05d", host);
  return buf;
}

double ClusterModel::Jitter() {
  // splitmix64: cheap and deterministic for a given seed.
  uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return 0.98 + 0.04 * static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t ClusterModel::GemmNs(int32_t r, double flops) {
  double ns = flops / (kPeakTflops * 1e12 * kEfficiency) * 1e9 * Jitter();
  if (Has(r, FaultKind::kSlowGpu)) ns *= kSlowGpuFactor;
  return static_cast<uint64_t>(ns);
}

void ClusterModel::ActivateFaults(int w) {
  std::fill(active_.begin(), active_.end(), 0);
  for (const FaultSpec& f : spec_.faults) {
    if (w < f.at_window) continue;
    for (int32_t r : f.ranks) active_[static_cast<size_t>(r)] |= 1u << static_cast<int>(f.kind);
  }
}

void ClusterModel::Emit(int32_t r, Sig sig, uint64_t launch, uint64_t start, uint64_t dur,
                        uint16_t stream, uint32_t seq, OpClass cls) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  xpu_record_v1 rec{};
  rec.sig_id = sig;
  rec.seq = seq;
  rec.stream = stream;
  const uint64_t end = start + dur;
  const int32_t issue = static_cast<int32_t>(std::min<uint64_t>(start - launch, INT32_MAX));
  bool timed = true;
  if (spec_.timing == TimingPolicy::kSampled) {
    if (cls == kCollectiveOp) {
      // The interposer's occurrence record; the plugin's timed one follows.
      xpu_record_v1 occ = rec;
      occ.start_ns = launch;
      occ.flags = XPU_REC_NOT_TIMED;
      SetDuration(&occ, end - launch);
      k.out.push_back(occ);
      rec.flags = XPU_REC_PLUGIN;
    } else {
      const uint32_t n = ++k.occurrences[sig];
      timed = n <= kSampleFirst || (n - kSampleFirst) % kSampleEvery == 0;
      if (timed) rec.flags = XPU_REC_SAMPLED;
    }
  }
  if (timed) {
    rec.start_ns = start;
    rec.flags |= XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
    rec.issue_latency_ns = issue;
    SetDuration(&rec, dur);
  } else {
    rec.start_ns = launch;
    rec.flags = XPU_REC_NOT_TIMED;
    SetDuration(&rec, end - launch);
  }
  k.out.push_back(rec);
}

void ClusterModel::Compute(int32_t r, Sig sig, uint64_t dur, uint64_t dep, bool traced) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  k.cpu += kLaunchNs;
  const uint64_t launch = k.cpu;
  const uint64_t start = std::max({launch, k.compute_free, dep});
  k.compute_free = start + dur;
  ++k.compute_seq;
  if (traced) Emit(r, sig, launch, start, dur, 1, k.compute_seq, kGemmOp);
}

void ClusterModel::Host(int32_t r, Sig sig, uint64_t dur, uint32_t seq) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  xpu_record_v1 rec{};
  rec.sig_id = sig;
  rec.start_ns = k.cpu;
  rec.seq = seq;
  rec.flags = XPU_REC_HOST;
  SetDuration(&rec, dur);
  k.out.push_back(rec);
  k.cpu += dur;
}

void ClusterModel::SyncStream(int32_t r) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  const uint64_t done = std::max({k.cpu, k.compute_free, k.comm_free});
  xpu_record_v1 rec{};
  rec.sig_id = kSync;
  rec.start_ns = k.cpu;
  rec.flags = XPU_REC_HOST;
  SetDuration(&rec, done - k.cpu);
  k.out.push_back(rec);
  k.cpu = done;
}

void ClusterModel::Collective(Sig sig, CommSlot slot, const std::vector<int32_t>& members,
                              uint64_t bus_bytes, double bw) {
  thread_local std::vector<uint64_t> ready;
  ready.resize(members.size());
  uint64_t last = 0;
  bool slow = false;
  for (size_t i = 0; i < members.size(); ++i) {
    Rank& k = ranks_[static_cast<size_t>(members[i])];
    k.cpu += kLaunchNs;
    // The communication stream waits for the rank's compute stream.
    ready[i] = std::max({k.cpu, k.comm_free, k.compute_free});
    last = std::max(last, ready[i]);
    slow |= Has(members[i], FaultKind::kSlowLink);
  }
  double ns = static_cast<double>(bus_bytes) / bw * 1e9 * Jitter();
  if (slow) ns *= kSlowLinkFactor;
  const uint64_t end = last + static_cast<uint64_t>(ns);
  for (size_t i = 0; i < members.size(); ++i) {
    const int32_t r = members[i];
    Rank& k = ranks_[static_cast<size_t>(r)];
    Emit(r, sig, k.cpu, ready[i], end - ready[i], 2, ++k.coll_seq[slot], kCollectiveOp);
    k.comm_free = end;
  }
}

double ClusterModel::LinkNs(int32_t src, int32_t dst, uint64_t bytes) {
  double ns = static_cast<double>(bytes) / kLinkBw * 1e9 * Jitter();
  if (Has(src, FaultKind::kSlowLink) || Has(dst, FaultKind::kSlowLink)) ns *= kSlowLinkFactor;
  return ns;
}

uint64_t ClusterModel::PostSend(int32_t src, int32_t dst, Sig sig, uint64_t bytes) {
  Rank& k = ranks_[static_cast<size_t>(src)];
  k.cpu += kLaunchNs;
  const uint64_t ready = std::max({k.cpu, k.comm_free, k.compute_free});
  const uint64_t end = ready + static_cast<uint64_t>(LinkNs(src, dst, bytes));
  Emit(src, sig, k.cpu, ready, end - ready, 2, ++k.coll_seq[kRingComm], kCollectiveOp);
  k.comm_free = end;
  return ready;
}

uint64_t ClusterModel::Receive(int32_t src, int32_t dst, Sig sig, uint64_t bytes,
                               uint64_t sender_ready) {
  Rank& k = ranks_[static_cast<size_t>(dst)];
  k.cpu += kLaunchNs;
  const uint64_t ready = std::max({k.cpu, k.comm_free, k.compute_free});
  const uint64_t end =
      std::max(ready, sender_ready) + static_cast<uint64_t>(LinkNs(src, dst, bytes));
  Emit(dst, sig, k.cpu, ready, end - ready, 2, ++k.coll_seq[kRingComm], kCollectiveOp);
  k.comm_free = end;
  return end;
}

void ClusterModel::StartStep(int32_t r) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  (void)k;
  Host(r, kStep, 0, static_cast<uint32_t>(steps_done_ + 1));
  const double ms = Has(r, FaultKind::kDataLoader) ? kSlowDataLoaderMs : kDataLoaderMs;
  Host(r, kDataLoader, static_cast<uint64_t>(ms * 1e6 * Jitter()), 0);
}

void ClusterModel::GcPause(int32_t r) {
  if (!Has(r, FaultKind::kGc)) return;
  Host(r, kGc, static_cast<uint64_t>(kGcMsPerLayer * 1e6 * Jitter()), 1000);
}

void ClusterModel::Optimizer(int32_t r) {
  Rank& k = ranks_[static_cast<size_t>(r)];
  Compute(r, kNumSigs, static_cast<uint64_t>(300000 * Jitter()), k.comm_free, /*traced=*/false);
  SyncStream(r);
}

void ClusterModel::HangAt(CommSlot slot, Sig sig, const std::vector<int32_t>& members,
                          uint64_t bytes) {
  hang_.active = true;
  hang_.window = window_;
  hang_.kind = sig == kAllGather ? XPU_OP_ALLGATHER : XPU_OP_ALLREDUCE;
  hang_.bytes = bytes;
  hang_.name = "ncclAllReduce";
  hang_.comm_id = CommId(members.front(), slot);
  hang_.comm_nranks = static_cast<int32_t>(members.size());
  hang_.since_ns = UINT64_MAX;
  for (int32_t r : members) {
    Rank& k = ranks_[static_cast<size_t>(r)];
    HangRole role = HangRole::kWaiting;
    if (Has(r, FaultKind::kStop)) role = HangRole::kStopped;
    if (Has(r, FaultKind::kPython)) role = HangRole::kInPython;
    if (Has(r, FaultKind::kMismatch)) role = HangRole::kOtherSize;
    if (Has(r, FaultKind::kHang)) role = HangRole::kLinkFrom;
    roles_[static_cast<size_t>(r)] = role;
    if (role == HangRole::kStopped || role == HangRole::kInPython) continue;
    k.cpu += kLaunchNs;
    hang_.seq = ++k.coll_seq[slot];
    hang_.since_ns = std::min(hang_.since_ns, k.cpu);
  }
  if (hang_.since_ns == UINT64_MAX) hang_.since_ns = ranks_[members.front()].cpu;
}

std::vector<int32_t> ClusterModel::StuckMembers() const {
  if (!hang_.active) return {};
  std::vector<int32_t> out;
  for (int32_t r = 0; r < spec_.ranks; ++r) {
    if (roles_[static_cast<size_t>(r)] != HangRole::kNone) out.push_back(r);
  }
  return out;  // rank order is the communicator's rank order in both layouts
}

int32_t ClusterModel::RingNext(int32_t r) const {
  if (spec_.layout.data_parallel_only()) return (r + 1) % spec_.ranks;
  const std::vector<int32_t> g = DpGroupOf(r);
  const int32_t i = CommRank(r, kDpComm);
  return g[static_cast<size_t>((i + 1) % static_cast<int32_t>(g.size()))];
}

std::vector<int32_t> ClusterModel::TpGroupOf(int32_t r) const {
  const int tp = spec_.layout.data_parallel_only() ? spec_.ranks_per_host : spec_.layout.tp;
  std::vector<int32_t> g;
  const int32_t base = r - r % tp;
  for (int32_t i = base; i < std::min(spec_.ranks, base + tp); ++i) g.push_back(i);
  return g;
}

std::vector<int32_t> ClusterModel::DpGroupOf(int32_t r) const {
  if (spec_.layout.data_parallel_only()) return world_;
  const int tp = spec_.layout.tp;
  const int32_t stage = r / (tp * dp_);
  const int32_t tp_i = r % tp;
  std::vector<int32_t> g;
  for (int32_t d = 0; d < dp_; ++d) g.push_back(tp_i + tp * (d + dp_ * stage));
  return g;
}

uint64_t ClusterModel::CommId(int32_t r, CommSlot slot) const {
  const Layout& l = spec_.layout;
  if (l.data_parallel_only()) {
    if (slot == kDpComm) return kWorldComm;
    if (slot == kRingComm) return kRingComm;
    return kHostTpCommBase + static_cast<uint64_t>(HostOf(r));
  }
  const int32_t stage = r / (l.tp * dp_);
  if (slot == kTpComm) return kTpCommBase + static_cast<uint64_t>(r / l.tp);
  if (slot == kDpComm) return kDpCommBase + static_cast<uint64_t>(stage * l.tp + r % l.tp);
  return kPipeCommBase + static_cast<uint64_t>(r % (l.tp * dp_));
}

int32_t ClusterModel::CommRank(int32_t r, CommSlot slot) const {
  const Layout& l = spec_.layout;
  if (l.data_parallel_only()) {
    if (slot == kTpComm) return r % spec_.ranks_per_host;
    return r;
  }
  if (slot == kTpComm) return r % l.tp;
  if (slot == kDpComm) return (r / l.tp) % dp_;
  return r / (l.tp * dp_);  // pipeline: the stage
}

int32_t ClusterModel::CommSize(CommSlot slot) const {
  const Layout& l = spec_.layout;
  if (l.data_parallel_only()) {
    return slot == kTpComm ? std::min(spec_.ranks, spec_.ranks_per_host) : spec_.ranks;
  }
  if (slot == kTpComm) return l.tp;
  if (slot == kDpComm) return dp_;
  return l.pp;
}

}  // namespace xpu::sim
