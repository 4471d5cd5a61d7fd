#include "engine/detectors/void_minority.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  std::vector<std::string> lines;
  for (const analysis::RankTrace& t : v.ranks) {
    analysis::Steps st = analysis::FindSteps(t);
    analysis::VoidFigures f = analysis::ComputeVoid(t, st);
    if (f.steps == 0) continue;
    const double vi = f.VMinority();
    const VoidBaseline::Verdict verdict =
        base[t.rank].Judge(vi, thr, delta, baseline_windows, prev);
    if (!verdict.over || held.Hold(absl::StrCat(t.rank)) < persist) continue;
    d.ranks.push_back(t.rank);
    lines.push_back(absl::StrCat("rank ", t.rank, " V_minority ", Fmt(vi * 100, 1),
                                 " % (T_minority ", Fmt(f.minority_s * 1e3, 1), " ms of ",
                                 Fmt((f.step_s - f.inter_s) * 1e3, 1), " ms in-step time over ",
                                 f.steps, " steps", VoidComparisons(verdict, prev, hb), ")"));
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
