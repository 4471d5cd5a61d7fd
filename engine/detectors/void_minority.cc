#include "engine/detectors/void_minority.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/analysis/steps.h"
#include "engine/analysis/void_time.h"

namespace xpu::engine {

void VoidMinorityDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double thr = Param(v, "void_minority.threshold");
  const double delta = Param(v, "void_minority.history_delta");
  const int baseline_windows = static_cast<int>(Param(v, "history.baseline_windows"));
  auto& base = baseline_[job.job()];
  // Previous runs of the job name on this GPU model (engine/history/).
  const history::JobHistory* jh = history_ != nullptr ? &history_->Get(job) : nullptr;
  const history::HistoryFigure* prev =
      jh != nullptr && jh->baseline.void_minority.runs >= static_cast<int>(Param(v, "history.min_runs"))
          ? &jh->baseline.void_minority
          : nullptr;
  Diagnosis d = NewDiagnosis(job, "void_minority", Team::kInfrastructure);
  std::vector<std::string> lines;
  for (const analysis::RankTrace& t : v.ranks) {
    analysis::Steps st = analysis::FindSteps(t);
    analysis::VoidFigures f = analysis::ComputeVoid(t, st);
    if (f.steps == 0) continue;
    const double vi = f.VMinority();
    Baseline& b = base[t.rank];
    const bool have_base = b.windows >= baseline_windows;
    const double mean_base = b.windows ? b.sum / b.windows : 0;
    const bool over = vi >= thr || (have_base && vi > mean_base + delta) || (prev != nullptr && vi > prev->value + delta);
    if (!over) {
      if (!have_base) {
        b.sum += vi;
        b.windows++;
      }
      continue;
    }
    d.ranks.push_back(t.rank);
    lines.push_back(absl::StrCat("rank ", t.rank, " V_minority ", Fmt(vi * 100, 1), " % (T_minority ",
                                 Fmt(f.minority_s * 1e3, 1), " ms of ", Fmt((f.step_s - f.inter_s) * 1e3, 1), " ms in-step time over ", f.steps,
                                 " steps", have_base ? absl::StrCat(", baseline ", Fmt(mean_base * 100, 1), " %") : "",
                                 prev != nullptr ? absl::StrCat(", ", Fmt(prev->value * 100, 1), " % in ",
                                                                jh->baseline.Describe(prev->runs))
                                                 : "",
                                 ")"));
  }
  if (d.ranks.empty()) return;
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "void_minority";
  d.evidence = absl::StrCat("untraced (minority) GPU kernels occupy the step: ", absl::StrJoin(lines, ", "),
                            " (threshold ", Fmt(thr * 100, 1), " %", v.backbone.empty() ? "" : " for backbone ",
                            v.backbone, ", or baseline / history + ", Fmt(delta * 100, 1), " points)");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
