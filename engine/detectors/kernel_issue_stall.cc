#include "engine/detectors/kernel_issue_stall.h"

#include <algorithm>
#include <array>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {
namespace {

using analysis::KernelFamily;

const char* FamilyName(KernelFamily f) {
  return f == KernelFamily::kCompute ? "compute" : "communication";
}

// Of samples sorted ascending.
double FractionBelow(const std::vector<double>& sorted, double x) {
  if (sorted.empty()) return 0;
  const auto n = std::lower_bound(sorted.begin(), sorted.end(), x) - sorted.begin();
  return static_cast<double>(n) / static_cast<double>(sorted.size());
}

struct Finding {
  int32_t rank;
  std::string what;  // the comparison made, with figures
};

}  // namespace

// One window's judgement, step by step: what each rank did, which of its
// kernel families stall and why, and the diagnoses once a stall persists.
// Reads and updates the detector's baselines and streaks.
class KernelIssueStallDetector::WindowPass {
 public:
  WindowPass(KernelIssueStallDetector& d, const JobState& job, const WindowView& v)
      : d_(d), job_(job), v_(v) {
    ReadThresholds();
  }

  void Run(DiagnosisSink& sink) {
    MeasureRanks();
    MeasurePeers();
    PoolSamples();
    FindWaitingRanks();
    MeasureAgainstPeers();
    JudgeRanks();
    UpdateSyncBaselines();
    // "rank/cause" -> consecutive windows, this one included; a streak that
    // does not continue in this window ends.
    Streaks::Window held = d_.streaks_.Begin(job_.job());
    if (stalled_.empty()) return;
    Report(held, sink);
  }

 private:
  // Per rank: samples per family (by FamilyIndex; sorted), steps, host
  // events.
  struct RankData {
    RankMemory* mem = nullptr;  // what the detector keeps of the rank
    std::array<std::vector<double>, 2> lat;
    double step_s = 0;
    size_t steps = 0;
    analysis::HostTime gc, sync, dataloader;
    analysis::SyncIdle sync_idle;  // GPU idle after sync returns
    double comm_s = 0;             // timed collective time within the steps
  };

  void ReadThresholds() {
    min_samples_ = static_cast<size_t>(Param("issue_stall.min_samples"));
    ks_thr_ = Param("issue_stall.ks");
    shift_ = Param("issue_stall.shift_ratio");
    floor_us_ = Param("issue_stall.floor_us");
    steep_ = Param("issue_stall.steep_fraction");
    step_fraction_ = Param("issue_stall.step_fraction");
    sync_cost_ = Param("issue_stall.sync_cost_share");
    peer_sync_cost_ = Param("issue_stall.sync_peer_cost_share");
    min_gc_ = Param("issue_stall.min_gc_share");
    gc_alone_ = Param("issue_stall.gc_alone_share");
    min_dataloader_ = Param("dataloader.min_share");
    baseline_windows_ = static_cast<int>(Param("history.baseline_windows"));
    wait_share_ = Param("issue_stall.wait_share");
    persist_ = std::max(1, static_cast<int>(Param("issue_stall.persist_windows")));
    sync_growth_ = Param("issue_stall.sync_growth");
    min_runs_ = static_cast<int>(Param("history.min_runs"));
  }
  double Param(std::string_view key) const { return d_.Param(v_, key); }

  // Issue latencies per family (topped up, TopUp), and the steps with the
  // host events and collective time within them (complete steps only, so
  // that shares and per-step counts compare like with like). On the
  // detector's thread: measured in parallel parts too, beside the other
  // detectors and the ingest on 4 cores, 100k ranks' window ticks were no
  // shorter (docs/scale.md).
  void MeasureRanks() {
    data_.resize(v_.ranks.size());
    std::unordered_map<int32_t, RankMemory>& mem = d_.ranks_[job_.job()];
    for (size_t i = 0; i < v_.ranks.size(); ++i) {
      data_[i].mem = &mem[v_.ranks[i].rank];
      MeasureRank(v_.ranks[i], data_[i]);
    }
  }

  void MeasureRank(const analysis::RankTrace& t, RankData& d) const {
    for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
      std::vector<double>& lat = d.lat[FamilyIndex(f)];
      lat = analysis::IssueLatenciesUs(t, f);
      TopUp(lat, d.mem->previous[FamilyIndex(f)]);
      std::sort(lat.begin(), lat.end());  // each comparison below reads them sorted
    }
    const analysis::Steps& st = v_.StepsOf(t);
    for (double s : st.DurationsS()) d.step_s += s;
    d.steps = st.boundaries_ns.size() > 1 ? st.boundaries_ns.size() - 1 : 0;
    const uint64_t from = d.steps ? st.boundaries_ns.front() : 0;
    const uint64_t to = d.steps ? st.boundaries_ns.back() : UINT64_MAX;
    d.gc = analysis::HostEventTime(t, XPU_OP_PY_GC, from, to);
    d.sync = analysis::SyncTime(t, from, to);
    d.sync_idle = analysis::ComputeSyncIdle(t, st);
    d.dataloader = analysis::HostEventTime(t, XPU_OP_PY_DATALOADER, from, to);
    for (const analysis::Op& op : t.ops) {
      if (op.timed() && xpu_op_is_collective(op.kind) && op.start_ns >= from && op.start_ns < to) {
        d.comm_s += static_cast<double>(op.dur_ns) * 1e-9;
      }
    }
  }

  // A family with fewer than min_samples issue latencies in this window
  // (long steps: 3 s windows of 85 ms steps held 16 to 18) is judged on the
  // previous window's and this one's together, so that it is judged in
  // every window and a stall can persist; the previous window's alone are
  // never judged twice. `last` holds the previous window's and gets this
  // one's: at most min_samples per rank and family, so that memory stays
  // linear in the job's size, whatever a window holds.
  void TopUp(std::vector<double>& mine, std::vector<float>& last) const {
    std::vector<float> now(mine.end() - static_cast<long>(std::min(mine.size(), min_samples_)),
                           mine.end());
    if (!mine.empty() && mine.size() < min_samples_) {
      mine.insert(mine.begin(), last.begin(), last.end());
    }
    last = std::move(now);
  }

  // A window's sorted samples `mine` into the rank's baseline: at most
  // kBaselineQuantiles of them (EvenQuantiles), merged in order.
  static void AddToBaseline(const std::vector<double>& mine, Baseline& b) {
    const std::vector<double> q = analysis::EvenQuantiles(mine, kBaselineQuantiles);
    std::vector<float> merged(b.samples_us.size() + q.size());
    std::merge(b.samples_us.begin(), b.samples_us.end(), q.begin(), q.end(), merged.begin());
    b.samples_us = std::move(merged);
    b.windows++;
  }

  // Every rank's samples of each family, sorted once, and each rank's KS
  // distance to the others' (analysis::KsDistancesToOthers: one pass, where
  // a search of the pool per sample was the largest part of the detector at
  // 100k ranks); each rank's median of the others is answered on the pool
  // without its own samples (analysis::PoolComplement). Both keep the
  // window linear in the job's size (a copy of the other ranks' samples per
  // rank would be quadratic). The pool's prefix sums, which only the W1
  // figure of a flagged rank reads, are summed when first needed (VsPeers):
  // as large as the pool, a 100k-rank job's hundreds of MB.
  void PoolSamples() {
    for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
      Pool& p = pools_[FamilyIndex(f)];
      std::vector<const std::vector<double>*> sets;
      sets.reserve(data_.size());
      for (const RankData& d : data_) sets.push_back(&d.lat[FamilyIndex(f)]);
      p.ks = analysis::KsDistancesToOthers(sets, &p.sorted);
      p.prefix.clear();
      p.index = analysis::PoolIndex(p.sorted);
    }
  }

  // A rank that waits in its collectives for a slower peer (a slow GPU, a
  // stalled host elsewhere) drains its queue while it waits: its short
  // issue latencies are the peer's doing, not its own. Such a rank's
  // collectives take more than wait_share of the step beyond the
  // least-waiting rank's.
  void FindWaitingRanks() {
    double least_comm_share = -1;
    for (const RankData& d : data_) {
      if (d.steps == 0 || d.step_s <= 0) continue;
      const double share = d.comm_s / d.step_s;
      if (least_comm_share < 0 || share < least_comm_share) least_comm_share = share;
    }
    waiting_.resize(data_.size());
    for (size_t i = 0; i < data_.size(); ++i) {
      waiting_[i] = least_comm_share >= 0 && data_[i].step_s > 0 &&
                    data_[i].comm_s / data_[i].step_s - least_comm_share > wait_share_;
    }
  }

  double SyncsPerStep(size_t i) const {
    return data_[i].steps
               ? static_cast<double>(data_[i].sync.count) / static_cast<double>(data_[i].steps)
               : 0.0;
  }
  // The rank's synchronizations per step in its first windows; -1 until
  // they are in.
  double BaseRate(int32_t rank) const {
    auto it = sync_base().find(rank);
    return it == sync_base().end() || it->second.windows < baseline_windows_
               ? -1.0
               : it->second.per_step_sum / it->second.windows;
  }
  // Synchronizations that cost the step GPU time: the GPU idles after they
  // return for sync_cost_share of the step (the host refills an empty
  // queue). A healthy step's few syncs (timing, loss read-out, FSDP's
  // event waits) cost ~0.1 %, however many there are.
  bool CostlySyncs(size_t i) const { return SyncCostShare(i) >= sync_cost_; }
  // Synchronization as the cause of a stall that a comparison found, or of
  // a steep CDF: costly, or more than the peers (MoreSyncsThanPeers), or,
  // once the rank's first windows gave its own rate, grown beyond
  // sync_growth x that rate by at least one per step (a training script may
  // synchronize a few times per step for its own timing and logging; what
  // it did from the start is its baseline).
  bool ExcessSyncs(size_t i) const {
    const double rate = SyncsPerStep(i), base = BaseRate(v_.ranks[i].rank);
    if (base < 0) return CostlySyncs(i) || MoreSyncsThanPeers(i);
    return rate > sync_growth_ * base &&
           (CostlySyncs(i) || MoreSyncsThanPeers(i) || rate >= base + 1);
  }
  // Synchronization that is a finding by itself, without a stall in the
  // issue latencies (syncs inside a GPU-bound forward leave most of its
  // latencies long): costly, or more than the peers and costing
  // sync_peer_cost_share of the step more than theirs; beyond the rank's
  // own first-window rate once it is known.
  bool SyncsAlone(size_t i) const {
    const double rate = SyncsPerStep(i), base = BaseRate(v_.ranks[i].rank);
    if (base >= 0 && rate <= sync_growth_ * base) return false;
    if (CostlySyncs(i)) return true;
    const double peer_cost = PeerSyncCost(i);
    return MoreSyncsThanPeers(i) && peer_cost >= 0 &&
           SyncCostShare(i) - peer_cost >= peer_sync_cost_;
  }
  double SyncCostShare(size_t i) const {
    return data_[i].step_s > 0 ? data_[i].sync_idle.idle_s / data_[i].step_s : 0;
  }
  // The other ranks' sync cost share, as PeerSyncRate; -1 without.
  double PeerSyncCost(size_t i) const {
    if (peers_with_steps_ == 0) return -1;
    if (data_.size() == 2) return data_[1 - i].steps ? SyncCostShare(1 - i) : -1;
    return peer_cost_median_;
  }
  // One rank synchronizing where the others do not (a .item() or a
  // synchronize in its own code path): more than sync_growth x the other
  // ranks' rate, and at least one more per step. Its peers are the
  // reference, from the first window on.
  bool MoreSyncsThanPeers(size_t i) const {
    const double peers = PeerSyncRate(i);
    const double rate = SyncsPerStep(i);
    return peers >= 0 && rate >= peers + 1 && rate > sync_growth_ * peers;
  }
  // The other ranks' synchronizations per step: the other rank's of two,
  // else the median of all ranks (one rank moves it little); -1 without.
  double PeerSyncRate(size_t i) const {
    if (peers_with_steps_ == 0) return -1;
    if (data_.size() == 2) return data_[1 - i].steps ? SyncsPerStep(1 - i) : -1;
    return peer_rate_median_;
  }
  double GcShare(size_t i) const {
    return data_[i].step_s > 0 ? data_[i].gc.seconds / data_[i].step_s : 0;
  }
  std::map<int32_t, SyncBaseline>& sync_base() const { return d_.sync_base_[job_.job()]; }

  // Every rank's families against their references, in order: peers, the
  // rank's own first windows, previous runs of the job name, and a steep
  // CDF with excess synchronization. The first comparison that flags a
  // family is recorded in stalled_; a family no comparison flags feeds the
  // rank's baseline while that is incomplete.
  // The ranks' median sync rate and cost, once per window: every rank is
  // compared with them (a median per rank judged made the pass quadratic:
  // 100k ranks' window took over 15 minutes).
  void MeasurePeers() {
    std::vector<double> rates, costs;
    for (size_t i = 0; i < data_.size(); ++i) {
      if (data_[i].steps) {
        rates.push_back(SyncsPerStep(i));
        costs.push_back(SyncCostShare(i));
      }
    }
    peers_with_steps_ = rates.size();
    if (rates.size() >= 2) {
      peer_rate_median_ = analysis::Median(std::move(rates));
      peer_cost_median_ = analysis::Median(std::move(costs));
    }
  }

  void JudgeRanks() {
    jh_ = d_.history_ != nullptr ? &d_.history_->Get(job_) : nullptr;
    for (size_t i = 0; i < v_.ranks.size(); ++i) {
      const int32_t rank = v_.ranks[i].rank;
      for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
        const std::vector<double>& mine = data_[i].lat[FamilyIndex(f)];
        if (mine.size() < min_samples_ || waiting_[i]) continue;
        const double my_med = analysis::QuantileOfSorted(mine, 0.5);
        const bool by_peers = VsPeers(i, f, my_med);
        Baseline& b = data_[i].mem->base[FamilyIndex(f)];
        bool changed = b.windows >= baseline_windows_ && VsOwnHistory(i, f, my_med, b);
        if (!changed && jh_ != nullptr) changed = VsPreviousRuns(i, f, my_med);
        if (!changed && !by_peers) changed = SteepCdf(i, f, my_med);
        if (changed) changed_.insert(rank);
        if (f == KernelFamily::kCompute) {
          compute_judged_.insert(rank);
          if (by_peers || changed) compute_stalled_.insert(rank);
        }
        if (!changed && b.windows < baseline_windows_) {
          // A rank's first windows are its baseline also where it differs
          // from its peers: what it did from the start is its role (FSDP's
          // rank 0, a logging rank), and only a change from it, or a cause
          // (GC, synchronization), is a stall. (The sync-alone finding
          // below does not keep a family out of the baseline either: its
          // issue latencies are not the evidence.)
          AddToBaseline(mine, b);
        }
      }
      if (!stalled_.count(rank) && !waiting_[i] && data_[i].steps && SyncsAlone(i)) {
        stalled_[rank].push_back(absl::StrCat("GPU idle after synchronizations ",
                                              Fmt(SyncCostShare(i) * 100, 1),
                                              " % of the step time"));
      }
    }
  }

  // Each judged rank's distance from the pooled samples of the others
  // (PoolSamples), and their median, measured in parallel parts of the
  // ranks; the judging stays in order.
  void MeasureAgainstPeers() {
    peers_.assign(data_.size(), {});
    InParts(data_.size(), kMaxParts, kRanksPerPart, [this](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        if (waiting_[i]) continue;
        for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
          const std::vector<double>& mine = data_[i].lat[FamilyIndex(f)];
          if (mine.size() < min_samples_) continue;
          const Pool& pool = pools_[FamilyIndex(f)];
          const analysis::PoolComplement others(pool.sorted, pool.prefix, mine, &pool.index);
          if (others.size() < min_samples_) continue;
          peers_[i][FamilyIndex(f)] = {true, pool.ks[i], others.Quantile(0.5)};
        }
      }
    });
  }

  // Against the pooled samples of the other ranks (one rank stalls: GC).
  bool VsPeers(size_t i, KernelFamily f, double my_med) {
    const PeerFigures& p = peers_[i][FamilyIndex(f)];
    if (!p.measured || p.ks < ks_thr_ || my_med >= shift_ * p.median) return false;
    const std::vector<double>& mine = data_[i].lat[FamilyIndex(f)];
    Pool& pool = pools_[FamilyIndex(f)];
    if (pool.prefix.empty()) pool.prefix = analysis::PrefixSums(pool.sorted);
    const analysis::PoolComplement others(pool.sorted, pool.prefix, mine, &pool.index);
    stalled_[v_.ranks[i].rank].push_back(absl::StrCat(
        FamilyName(f), " kernels: median issue latency ", Fmt(my_med, 1), " us vs peers ",
        Fmt(p.median, 1), " us, KS ", Fmt(p.ks), ", W1 ", Fmt(others.Wasserstein1(), 1), " us"));
    return true;
  }

  // Against the rank's own first windows (every rank stalls from some point
  // on: a new synchronize in the model).
  bool VsOwnHistory(size_t i, KernelFamily f, double my_med, const Baseline& b) {
    const std::vector<double>& mine = data_[i].lat[FamilyIndex(f)];
    const double ks = analysis::KsDistanceOfSorted(mine, b.samples_us);
    const double hist_med = analysis::QuantileOfSorted(b.samples_us, 0.5);
    if (ks < ks_thr_ || my_med >= shift_ * hist_med) return false;
    const std::vector<double> base(b.samples_us.begin(), b.samples_us.end());  // flagged: W1
    stalled_[v_.ranks[i].rank].push_back(
        absl::StrCat(FamilyName(f), " kernels: median issue latency ", Fmt(my_med, 1),
                     " us vs this rank's history ", Fmt(hist_med, 1), " us, KS ", Fmt(ks), ", W1 ",
                     Fmt(analysis::Wasserstein1OfSorted(mine, base), 1), " us"));
    return true;
  }

  // Against previous runs of the job name on this GPU model: catches a
  // stall present from the job's first window (no clean baseline of its
  // own).
  bool VsPreviousRuns(size_t i, KernelFamily f, double my_med) {
    auto it = jh_->baseline.issue_latency.find(FamilyName(f));
    auto runs_it = jh_->baseline.issue_latency_runs.find(FamilyName(f));
    const int runs = runs_it != jh_->baseline.issue_latency_runs.end() ? runs_it->second : 0;
    if (it == jh_->baseline.issue_latency.end() || it->second.total() < min_samples_ ||
        runs < min_runs_) {
      return false;
    }
    const std::vector<double>& mine = data_[i].lat[FamilyIndex(f)];
    const double ks = history::KsDistance(mine, it->second);
    const double hist_med = it->second.MedianUs();
    if (ks < ks_thr_ || my_med >= shift_ * hist_med) return false;
    stalled_[v_.ranks[i].rank].push_back(
        absl::StrCat(FamilyName(f), " kernels: median issue latency ", Fmt(my_med, 1), " us vs ",
                     Fmt(hist_med, 1), " us in ", jh_->baseline.Describe(runs), ", KS ", Fmt(ks)));
    return true;
  }

  // Steep CDF with a host-side cause, no reference needed: most latencies
  // under floor_us, or a median that is a small fraction of the step (the
  // host never gets ahead of the GPU), while the rank synchronizes in excess
  // or collects garbage for gc_alone_share of its steps (a job that does so
  // from its first step has no clean windows of its own to compare with).
  bool SteepCdf(size_t i, KernelFamily f, double my_med) {
    const double below = FractionBelow(data_[i].lat[FamilyIndex(f)], floor_us_);
    const double step_us =
        data_[i].steps ? data_[i].step_s * 1e6 / static_cast<double>(data_[i].steps) : 0;
    const bool compressed = step_us > 0 && my_med < step_fraction_ * step_us;
    const bool cause = ExcessSyncs(i) || GcShare(i) >= gc_alone_;
    if (!((below >= steep_ || compressed) && cause)) return false;
    stalled_[v_.ranks[i].rank].push_back(absl::StrCat(
        FamilyName(f), " kernels: ", Fmt(below * 100, 0), " % of issue latencies under ",
        Fmt(floor_us_, 0), " us, median ", Fmt(my_med, 1),
        " us = ", Fmt(step_us > 0 ? my_med / step_us * 100 : 0, 1), " % of the ",
        Fmt(step_us / 1e3, 1), " ms step (steep CDF: the host never gets ahead)"));
    return true;
  }

  size_t IndexOf(int32_t rank) const {
    // v_.ranks is sorted by rank.
    return static_cast<size_t>(
        std::lower_bound(v_.ranks.begin(), v_.ranks.end(), rank,
                         [](const analysis::RankTrace& t, int32_t r) { return t.rank < r; }) -
        v_.ranks.begin());
  }

  // The ranks' own synchronization rates, from their first windows without
  // a stall.
  void UpdateSyncBaselines() {
    std::map<int32_t, SyncBaseline>& sb_of = sync_base();
    for (size_t i = 0; i < v_.ranks.size(); ++i) {
      const int32_t rank = v_.ranks[i].rank;
      SyncBaseline& sb = sb_of[rank];
      if (data_[i].steps == 0 || stalled_.count(rank) || sb.windows >= baseline_windows_) continue;
      sb.per_step_sum += SyncsPerStep(i);
      sb.windows++;
    }
  }

  // The host events that coincide with rank i's stall: Python GC ("gc"),
  // excess synchronization ("sync"), else none ("host"); `why` gets the
  // figures.
  std::string CauseOf(size_t i, std::string* why) const {
    const RankData& d = data_[i];
    const double gc_share = d.step_s > 0 ? d.gc.seconds / d.step_s : 0;
    if (d.gc.count > 0 && gc_share >= min_gc_) {
      *why = absl::StrCat("Python GC: ", d.gc.count, " collections, ", Fmt(d.gc.seconds * 1e3, 1),
                          " ms (", Fmt(gc_share * 100, 1), " % of step time)");
      return "gc";
    }
    if (ExcessSyncs(i) || SyncsAlone(i)) {
      *why = SyncEvidence(i);
      return "sync";
    }
    *why = "no GC or synchronization event coincides: unattributed host-side stall";
    return "host";
  }

  // The figures of rank i's synchronizations: rate, references, cost.
  std::string SyncEvidence(size_t i) const {
    const RankData& d = data_[i];
    const double base = BaseRate(v_.ranks[i].rank);
    const double peer_cost = PeerSyncCost(i);
    std::vector<std::string> refs;
    if (base >= 0)
      refs.push_back(absl::StrCat("this rank made ", Fmt(base, 1), " in its first windows"));
    if (MoreSyncsThanPeers(i)) {
      refs.push_back(absl::StrCat(
          "the other ranks make ", Fmt(PeerSyncRate(i), 1),
          peer_cost >= 0 ? absl::StrCat(" at ", Fmt(peer_cost * 100, 2), " % of the step")
                         : std::string()));
    }
    return absl::StrCat(
        "synchronization: ", d.sync.count, " sync calls, ", Fmt(SyncsPerStep(i), 1), " per step",
        refs.empty() ? std::string() : absl::StrCat(" (", absl::StrJoin(refs, "; "), ")"),
        "; the GPU idled ", Fmt(d.sync_idle.idle_s * 1e3, 1),
        " ms after they returned = ", Fmt(SyncCostShare(i) * 100, 2),
        " % of the step time (costly from ", Fmt(sync_cost_ * 100, 1), " %); ",
        Fmt(d.sync.seconds * 1e3, 1), " ms blocked");
  }

  // One diagnosis per cause, with the stalled ranks whose cause lasted
  // `persist` consecutive windows (a job's first window, with its start-up
  // synchronizations, is not a stall). A rank whose DataLoader takes >=
  // dataloader.min_share of the step is delayed between steps, not within:
  // slow_dataloader reports it.
  void Report(Streaks::Window& held, DiagnosisSink& sink) {
    struct Cause {
      std::vector<int32_t> ranks;
      std::vector<std::string> lines;
    };
    std::map<std::string, Cause> causes;
    for (const auto& [rank, what] : stalled_) {
      const size_t i = IndexOf(rank);
      const RankData& d = data_[i];
      if (d.step_s > 0 && d.dataloader.seconds / d.step_s >= min_dataloader_) continue;
      std::string why;
      const std::string cause = CauseOf(i, &why);
      // No cause, and only the peers see it: a difference the rank had in
      // its own first windows (or has had since its first window) is not a
      // stall.
      if (cause == "host" && !changed_.count(rank)) continue;
      // A host that cannot keep up starves the compute kernels it launches
      // first of all. Without a cause, a stall that only the communication
      // kernels show while the compute kernels stay queued is how the
      // collectives are scheduled (their stream waits on events of the
      // compute stream: FSDP's prefetches, DDP's buckets), not the host.
      if (cause == "host" && compute_judged_.count(rank) && !compute_stalled_.count(rank)) continue;
      if (held.Hold(absl::StrCat(rank, "/", cause)) < persist_) continue;
      Cause& c = causes[cause];
      c.ranks.push_back(rank);
      c.lines.push_back(absl::StrCat("rank ", rank, ": ", absl::StrJoin(what, "; "), "; ", why));
    }
    for (auto& [cause, c] : causes) {
      Diagnosis d = NewDiagnosis(job_, "kernel_issue_stall", Team::kAlgorithm);
      d.ranks = c.ranks;
      d.hosts = HostsOf(v_, d.ranks);
      d.subject = cause;
      d.severity = Severity::kWarning;
      const char* label = cause == "gc"     ? "garbage collection"
                          : cause == "sync" ? "unnecessary synchronization"
                                            : "host stall";
      d.evidence = absl::StrCat("kernel-issue stall (", label, ") on ", c.ranks.size(),
                                " rank(s): ", absl::StrJoin(c.lines, " | "));
      sink.Report(std::move(d));
    }
  }

  KernelIssueStallDetector& d_;
  const JobState& job_;
  const WindowView& v_;
  size_t min_samples_ = 0;
  double ks_thr_ = 0, shift_ = 0, floor_us_ = 0, steep_ = 0, step_fraction_ = 0, sync_cost_ = 0,
         peer_sync_cost_ = 0, min_gc_ = 0, gc_alone_ = 0, min_dataloader_ = 0, wait_share_ = 0,
         sync_growth_ = 0;
  int baseline_windows_ = 0, persist_ = 1, min_runs_ = 0;
  std::vector<RankData> data_;  // by index in v_.ranks
  struct Pool {
    std::vector<double> sorted, prefix;  // every rank's samples; analysis::PrefixSums
    std::vector<double> index;           // analysis::PoolIndex
    std::vector<double> ks;              // by rank index: KS distance to the others
  };
  std::array<Pool, 2> pools_;  // by FamilyIndex
  std::vector<bool> waiting_;  // waits for a slower peer: not judged
  struct PeerFigures {
    bool measured = false;  // enough samples of the rank and of the others
    double ks = 0, median = 0;
  };
  static size_t FamilyIndex(KernelFamily f) { return f == KernelFamily::kCompute ? 1 : 0; }
  // MeasureAgainstPeers: up to kMaxParts parallel parts of kRanksPerPart+ ranks.
  static constexpr size_t kRanksPerPart = 4096;
  static constexpr int kMaxParts = 4;
  std::vector<std::array<PeerFigures, 2>> peers_;  // per rank, by FamilyIndex
  size_t peers_with_steps_ = 0;                    // ranks with steps in the window
  double peer_rate_median_ = -1;  // their median synchronizations per step (2+ ranks)
  double peer_cost_median_ = -1;  // their median sync cost share (SyncCostShare)
  const history::JobHistory* jh_ = nullptr;
  std::map<int32_t, std::vector<std::string>> stalled_;  // rank -> comparisons that flag it
  std::set<int32_t> compute_judged_, compute_stalled_;   // ranks: compute family judged, flagged
  // Ranks that changed: against their own first windows, previous runs of
  // the job name, or a steep CDF with a cause (not the peers alone).
  std::set<int32_t> changed_;
};

void KernelIssueStallDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty()) return;
  WindowPass(*this, job, v).Run(sink);
}

}  // namespace xpu::engine
