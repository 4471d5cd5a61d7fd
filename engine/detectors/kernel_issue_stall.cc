#include "engine/detectors/kernel_issue_stall.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {
namespace {

using analysis::KernelFamily;
constexpr size_t kMaxBaselineSamples = 20000;

const char* FamilyName(KernelFamily f) {
  return f == KernelFamily::kCompute ? "compute" : "communication";
}

double FractionBelow(const std::vector<double>& v, double x) {
  if (v.empty()) return 0;
  size_t n = 0;
  for (double s : v) n += s < x;
  return static_cast<double>(n) / static_cast<double>(v.size());
}

struct Finding {
  int32_t rank;
  std::string what;  // the comparison made, with figures
};

}  // namespace

void KernelIssueStallDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty()) return;
  const size_t min_samples = static_cast<size_t>(Param(v, "issue_stall.min_samples"));
  const double ks_thr = Param(v, "issue_stall.ks");
  const double shift = Param(v, "issue_stall.shift_ratio");
  const double floor_us = Param(v, "issue_stall.floor_us");
  const double steep = Param(v, "issue_stall.steep_fraction");
  const double step_fraction = Param(v, "issue_stall.step_fraction");
  const double max_syncs = Param(v, "issue_stall.max_syncs_per_step");
  const double min_gc = Param(v, "issue_stall.min_gc_share");
  const double min_dataloader = Param(v, "dataloader.min_share");
  const int baseline_windows = static_cast<int>(Param(v, "history.baseline_windows"));
  const double wait_share = Param(v, "issue_stall.wait_share");
  const int persist = std::max(1, static_cast<int>(Param(v, "issue_stall.persist_windows")));

  // Per rank: samples per family, steps, host events.
  struct RankData {
    std::map<KernelFamily, std::vector<double>> lat;
    double step_s = 0;
    size_t steps = 0;
    analysis::HostTime gc, sync, dataloader;
    double comm_s = 0;  // timed collective time within the steps
  };
  std::vector<RankData> data(v.ranks.size());
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const analysis::RankTrace& t = v.ranks[i];
    for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
      data[i].lat[f] = analysis::IssueLatenciesUs(t, f);
    }
    analysis::Steps st = analysis::FindSteps(t);
    for (double s : st.DurationsS()) data[i].step_s += s;
    data[i].steps = st.boundaries_ns.size() > 1 ? st.boundaries_ns.size() - 1 : 0;
    // Host events within the complete steps, so that shares and per-step
    // counts compare like with like.
    const uint64_t from = data[i].steps ? st.boundaries_ns.front() : 0;
    const uint64_t to = data[i].steps ? st.boundaries_ns.back() : UINT64_MAX;
    data[i].gc = analysis::HostEventTime(t, XPU_OP_PY_GC, from, to);
    data[i].sync = analysis::SyncTime(t, from, to);
    data[i].dataloader = analysis::HostEventTime(t, XPU_OP_PY_DATALOADER, from, to);
    for (const analysis::Op& op : t.ops) {
      if (op.timed() && xpu_op_is_collective(op.kind) && op.start_ns >= from && op.start_ns < to) {
        data[i].comm_s += static_cast<double>(op.dur_ns) * 1e-9;
      }
    }
  }
  // A rank that waits in its collectives for a slower peer (a slow GPU, a
  // stalled host elsewhere) drains its queue while it waits: its short
  // issue latencies are the peer's doing, not its own.
  double least_comm_share = -1;
  for (const RankData& d : data) {
    if (d.steps == 0 || d.step_s <= 0) continue;
    const double share = d.comm_s / d.step_s;
    if (least_comm_share < 0 || share < least_comm_share) least_comm_share = share;
  }
  auto waits_for_peer = [&](size_t i) {
    return least_comm_share >= 0 && data[i].step_s > 0 &&
           data[i].comm_s / data[i].step_s - least_comm_share > wait_share;
  };
  auto syncs_per_step = [&](size_t i) {
    return data[i].steps
               ? static_cast<double>(data[i].sync.count) / static_cast<double>(data[i].steps)
               : 0.0;
  };
  // Excess synchronization: more than max_syncs per step, and, once the
  // rank's first windows gave its own rate, more than sync_growth x that
  // rate (a training script may synchronize a few times per step for its
  // own timing and logging; what it did from the start is its baseline).
  const double sync_growth = Param(v, "issue_stall.sync_growth");
  std::map<int32_t, SyncBaseline>& sync_base = sync_base_[job.job()];
  auto base_rate = [&](int32_t rank) {  // -1 until the rank's first windows are in
    auto it = sync_base.find(rank);
    return it == sync_base.end() || it->second.windows < baseline_windows
               ? -1.0
               : it->second.per_step_sum / it->second.windows;
  };
  auto excess_syncs = [&](size_t i) {
    const double rate = syncs_per_step(i), base = base_rate(v.ranks[i].rank);
    return rate > max_syncs && (base < 0 || rate > sync_growth * base);
  };

  std::map<std::string, Baseline>& base = baseline_[job.job()];
  const history::JobHistory* jh = history_ != nullptr ? &history_->Get(job) : nullptr;
  const int min_runs = static_cast<int>(Param(v, "history.min_runs"));
  std::map<int32_t, std::vector<std::string>> stalled;  // rank -> comparisons
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const int32_t rank = v.ranks[i].rank;
    const bool waiting = waits_for_peer(i);
    for (KernelFamily f : {KernelFamily::kCommunication, KernelFamily::kCompute}) {
      const std::vector<double>& mine = data[i].lat[f];
      if (mine.size() < min_samples || waiting) continue;
      const double my_med = analysis::Median(mine);
      // Peers.
      std::vector<double> peers;
      for (size_t j = 0; j < v.ranks.size(); ++j) {
        if (j != i) peers.insert(peers.end(), data[j].lat[f].begin(), data[j].lat[f].end());
      }
      bool flagged = false;
      if (peers.size() >= min_samples) {
        const double ks = analysis::KsDistance(mine, peers);
        const double peer_med = analysis::Median(peers);
        if (ks >= ks_thr && my_med < shift * peer_med) {
          stalled[rank].push_back(absl::StrCat(FamilyName(f), " kernels: median issue latency ",
                                               Fmt(my_med, 1), " us vs peers ", Fmt(peer_med, 1),
                                               " us, KS ", Fmt(ks), ", W1 ",
                                               Fmt(analysis::Wasserstein1(mine, peers), 1), " us"));
          flagged = true;
        }
      }
      // History.
      Baseline& b = base[absl::StrCat(rank, "/", FamilyName(f))];
      if (b.windows >= baseline_windows && !flagged) {
        const double ks = analysis::KsDistance(mine, b.samples_us);
        const double hist_med = analysis::Median(b.samples_us);
        if (ks >= ks_thr && my_med < shift * hist_med) {
          stalled[rank].push_back(
              absl::StrCat(FamilyName(f), " kernels: median issue latency ", Fmt(my_med, 1),
                           " us vs this rank's history ", Fmt(hist_med, 1), " us, KS ", Fmt(ks),
                           ", W1 ", Fmt(analysis::Wasserstein1(mine, b.samples_us), 1), " us"));
          flagged = true;
        }
      }
      // Previous runs of the job name on this GPU model: catches a stall
      // present from the job's first window (no clean baseline of its own).
      if (!flagged && jh != nullptr) {
        auto it = jh->baseline.issue_latency.find(FamilyName(f));
        auto runs_it = jh->baseline.issue_latency_runs.find(FamilyName(f));
        const int runs = runs_it != jh->baseline.issue_latency_runs.end() ? runs_it->second : 0;
        if (it != jh->baseline.issue_latency.end() && it->second.total() >= min_samples &&
            runs >= min_runs) {
          const double ks = history::KsDistance(mine, it->second);
          const double hist_med = it->second.MedianUs();
          if (ks >= ks_thr && my_med < shift * hist_med) {
            stalled[rank].push_back(absl::StrCat(
                FamilyName(f), " kernels: median issue latency ", Fmt(my_med, 1), " us vs ",
                Fmt(hist_med, 1), " us in ", jh->baseline.Describe(runs), ", KS ", Fmt(ks)));
            flagged = true;
          }
        }
      }
      // Steep CDF with excess synchronization, no reference needed.
      const double below = FractionBelow(mine, floor_us);
      const double step_us =
          data[i].steps ? data[i].step_s * 1e6 / static_cast<double>(data[i].steps) : 0;
      const bool compressed = step_us > 0 && my_med < step_fraction * step_us;
      if (!flagged && (below >= steep || compressed) && excess_syncs(i)) {
        stalled[rank].push_back(absl::StrCat(
            FamilyName(f), " kernels: ", Fmt(below * 100, 0), " % of issue latencies under ",
            Fmt(floor_us, 0), " us, median ", Fmt(my_med, 1),
            " us = ", Fmt(step_us > 0 ? my_med / step_us * 100 : 0, 1), " % of the ",
            Fmt(step_us / 1e3, 1), " ms step (steep CDF: the host never gets ahead)"));
        flagged = true;
      }
      if (!flagged && b.windows < baseline_windows) {
        b.samples_us.insert(b.samples_us.end(), mine.begin(), mine.end());
        if (b.samples_us.size() > kMaxBaselineSamples) {
          b.samples_us.erase(b.samples_us.begin(), b.samples_us.end() - kMaxBaselineSamples);
        }
        b.windows++;
      }
    }
  }
  // The ranks' own synchronization rates, from their first windows without
  // a stall.
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const int32_t rank = v.ranks[i].rank;
    SyncBaseline& sb = sync_base[rank];
    if (data[i].steps == 0 || stalled.count(rank) || sb.windows >= baseline_windows) continue;
    sb.per_step_sum += syncs_per_step(i);
    sb.windows++;
  }
  // "rank/cause" -> consecutive windows, this one included; a streak that
  // does not continue in this window ends.
  Streaks::Window held = streaks_.Begin(job.job());
  if (stalled.empty()) return;

  // Attribution.
  struct Cause {
    std::vector<int32_t> ranks;
    std::vector<std::string> lines;
  };
  std::map<std::string, Cause> causes;
  // A rank whose DataLoader takes >= dataloader.min_share of the step is
  // delayed between steps, not within: slow_dataloader reports it.
  for (const auto& [rank, what] : stalled) {
    size_t i = 0;
    while (v.ranks[i].rank != rank) ++i;
    const RankData& d = data[i];
    const double gc_share = d.step_s > 0 ? d.gc.seconds / d.step_s : 0;
    if (d.step_s > 0 && d.dataloader.seconds / d.step_s >= min_dataloader) continue;
    std::string cause, why;
    if (d.gc.count > 0 && gc_share >= min_gc) {
      cause = "gc";
      why = absl::StrCat("Python GC: ", d.gc.count, " collections, ", Fmt(d.gc.seconds * 1e3, 1),
                         " ms (", Fmt(gc_share * 100, 1), " % of step time)");
    } else if (excess_syncs(i)) {
      cause = "sync";
      const double base = base_rate(rank);
      why = absl::StrCat(
          "synchronization: ", d.sync.count, " sync calls, ", Fmt(syncs_per_step(i), 1),
          " per step (a healthy step makes <= ", Fmt(max_syncs, 0),
          base >= 0 ? absl::StrCat("; this rank made ", Fmt(base, 1), " in its first windows")
                    : std::string(),
          "), ", Fmt(d.sync.seconds * 1e3, 1), " ms blocked");
    } else {
      cause = "host";
      why = "no GC or synchronization event coincides: unattributed host-side stall";
    }
    // Reported once the same cause lasted `persist` consecutive windows on
    // the rank (a job's first window, with its start-up synchronizations,
    // is not a stall).
    const std::string key = absl::StrCat(rank, "/", cause);
    if (held.Hold(key) < persist) continue;
    Cause& c = causes[cause];
    c.ranks.push_back(rank);
    c.lines.push_back(absl::StrCat("rank ", rank, ": ", absl::StrJoin(what, "; "), "; ", why));
  }
  for (auto& [cause, c] : causes) {
    Diagnosis d = NewDiagnosis(job, "kernel_issue_stall", Team::kAlgorithm);
    d.ranks = c.ranks;
    d.hosts = HostsOf(v, d.ranks);
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

}  // namespace xpu::engine
