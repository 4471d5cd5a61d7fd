#include "engine/detectors/void_inter.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {

void VoidInterDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double thr = Param(v, "void_inter.threshold");
  const double delta = Param(v, "void_inter.history_delta");
  const int baseline_windows = static_cast<int>(Param(v, "history.baseline_windows"));
  auto& base = baseline_[job.job()];
  const int persist = static_cast<int>(Param(v, "void_inter.persist_windows"));
  Streaks::Window held = streaks_.Begin(job.job());
  // Previous runs of the job name on this GPU model (engine/history/).
  const history::HistoryBaseline* hb = history_ != nullptr ? &history_->Get(job).baseline : nullptr;
  const history::HistoryFigure* prev =
      hb != nullptr && hb->void_inter.runs >= static_cast<int>(Param(v, "history.min_runs"))
          ? &hb->void_inter
          : nullptr;
  Diagnosis d = NewDiagnosis(job, "void_inter", Team::kAlgorithm);
  std::vector<std::string> lines;
  for (const analysis::RankTrace& t : v.ranks) {
    const analysis::VoidFigures& f = v.VoidOf(t);
    if (f.steps == 0) continue;
    const double vi = f.VInter();
    const VoidBaseline::Verdict verdict =
        base[t.rank].Judge(vi, thr, delta, baseline_windows, prev);
    const bool dataloader_explains = f.inter_from_dataloader && f.dataloader_s > 0.5 * f.inter_s;
    if (!verdict.over) continue;
    if (dataloader_explains) continue;
    if (held.Hold(absl::StrCat(t.rank)) < persist) continue;
    d.ranks.push_back(t.rank);
    lines.push_back(absl::StrCat("rank ", t.rank, " V_inter ", Fmt(vi * 100, 1), " % (T_inter ",
                                 Fmt(f.inter_s * 1e3, 1), " ms of ", Fmt(f.step_s * 1e3, 1),
                                 " ms over ", f.steps, " steps", VoidComparisons(verdict, prev, hb),
                                 ")"));
  }
  if (d.ranks.empty()) return;
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "void_inter";
  d.evidence = absl::StrCat("inter-step CPU time leaves the GPU idle: ", absl::StrJoin(lines, ", "),
                            " (threshold ", Fmt(thr * 100, 1), " %",
                            v.backbone.empty() ? "" : " for backbone ", v.backbone,
                            ", or baseline / history + ", Fmt(delta * 100, 1), " points)");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
