#include "engine/detectors/void_minority.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {

void VoidMinorityDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double thr = Param(v, "void_minority.threshold");
  const double delta = Param(v, "void_minority.history_delta");
  const int baseline_windows = static_cast<int>(Param(v, "history.baseline_windows"));
  auto& base = baseline_[job.job()];
  const int persist = static_cast<int>(Param(v, "void_minority.persist_windows"));
  Streaks::Window held = streaks_.Begin(job.job());
  // Previous runs of the job name on this GPU model (engine/history/).
  const history::HistoryBaseline* hb = history_ != nullptr ? &history_->Get(job).baseline : nullptr;
  const history::HistoryFigure* prev =
      hb != nullptr && hb->void_minority.runs >= static_cast<int>(Param(v, "history.min_runs"))
          ? &hb->void_minority
          : nullptr;
  Diagnosis d = NewDiagnosis(job, "void_minority", Team::kInfrastructure);
  struct Figure {
    int32_t rank;
    analysis::VoidFigures f;
  };
  std::vector<Figure> figs;
  std::vector<double> all;
  for (const analysis::RankTrace& t : v.ranks) {
    const analysis::VoidFigures& f = v.VoidOf(t);
    if (f.steps == 0) continue;
    figs.push_back({t.rank, f});
    all.push_back(f.VMinority());
  }
  // With peers, ranks that run the same program are each other's
  // reference: the threshold names the program's untraced kernels when the
  // job's lower median is over it (every rank alike), or one rank that
  // stands out from its peers (twice their figure and `delta` above it);
  // a rank over the threshold whose peers are close below is the program's
  // own share, estimated unevenly (healthy FSDP's copies on one rank), and
  // so is one that stands out only because its peers fell below it.
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  const bool peers = figs.size() >= 2;
  const double lower_median = peers ? sorted[(sorted.size() - 1) / 2] : 0;
  const bool program_wide = peers && lower_median >= thr;
  // Every rank's reference with 3+ ranks: the median of all, found once
  // (per rank it made the detector quadratic in the ranks).
  const double median = peers ? analysis::Median(std::move(sorted)) : 0;
  std::vector<std::string> lines;
  for (size_t i = 0; i < figs.size(); ++i) {
    const analysis::VoidFigures& f = figs[i].f;
    const double vi = f.VMinority();
    double peer = 0;
    if (peers) peer = figs.size() == 2 ? all[1 - i] : median;
    // Standing out counts only for a rank that rose: one whose peers fell
    // below a figure it has had from its first windows (healthy FSDP's
    // ranks differ by nature) is measured against that baseline instead.
    const bool stands_out = peers && vi >= 2 * peer && vi >= peer + delta &&
                            base[figs[i].rank].Above(vi, baseline_windows);
    // The absolute threshold only where one is set (per backbone): how much
    // of a program's GPU time its untraced kernels take is its shape
    // (healthy FSDP: 26 %), not an anomaly; a rise above the rank's own
    // first windows or previous runs is.
    const VoidBaseline::Verdict verdict =
        base[figs[i].rank].Judge(vi, thr, delta, baseline_windows, prev,
                                 thr > 0 && (!peers || program_wide || stands_out));
    if (!verdict.over || held.Hold(absl::StrCat(figs[i].rank)) < persist) continue;
    d.ranks.push_back(figs[i].rank);
    lines.push_back(absl::StrCat(
        "rank ", figs[i].rank, " V_minority ", Fmt(vi * 100, 1), " % (T_minority ",
        Fmt(f.minority_s * 1e3, 1), " ms of ", Fmt((f.step_s - f.inter_s) * 1e3, 1),
        " ms in-step time over ", f.steps, " steps",
        peers ? absl::StrCat(", peers ", Fmt(peer * 100, 1), " %") : std::string(),
        VoidComparisons(verdict, prev, hb), ")"));
  }
  if (d.ranks.empty()) return;
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "void_minority";
  d.evidence = absl::StrCat(
      "untraced (minority) GPU kernels occupy the step: ", absl::StrJoin(lines, ", "),
      " (threshold ", Fmt(thr * 100, 1), " %", v.backbone.empty() ? "" : " for backbone ",
      v.backbone, ", or baseline / history + ", Fmt(delta * 100, 1), " points)");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
