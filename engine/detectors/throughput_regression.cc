#include "engine/detectors/throughput_regression.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"

namespace xpu::engine {
namespace {
constexpr size_t kMaxHistory = 4096;
}

void ThroughputRegressionDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const analysis::RankTrace* ref = nullptr;
  analysis::Steps steps;
  for (const analysis::RankTrace& t : v.ranks) {
    steps = v.StepsOf(t);
    if (steps.boundaries_ns.size() >= 2) {
      ref = &t;
      break;
    }
  }
  if (ref == nullptr) return;
  std::deque<double>& h = history_steps_[job.job()];
  for (double s : steps.DurationsS()) h.push_back(s);
  while (h.size() > kMaxHistory) h.pop_front();
  const size_t n = static_cast<size_t>(Param(v, "throughput.steps"));
  const double thr = Param(v, "throughput.threshold");
  analysis::ThroughputChange c = analysis::DetectThroughputChange(
      std::vector<double>(h.begin(), h.end()), n, thr, Param(v, "throughput.noise_z"));

  // Against previous runs of the job name on the same GPU model. The median
  // of the recent steps, like the runs' baselines, so that one checkpoint
  // step does not count as a regression.
  double hist_change = 0;
  std::string hist_line;
  if (history_ != nullptr && n > 0 && h.size() >= n) {
    const history::JobHistory& jh = history_->Get(job);
    const history::HistoryFigure& f = jh.baseline.step_median_s;
    if (f.runs >= static_cast<int>(Param(v, "history.min_runs")) && f.value > 0) {
      const double recent =
          analysis::Median(std::vector<double>(h.end() - static_cast<long>(n), h.end()));
      hist_change = recent / f.value - 1;
      if (hist_change > thr) {
        hist_line =
            absl::StrCat("step ", Fmt(recent * 1e3, 1), " ms (median of the last ", n,
                         " steps) vs ", Fmt(f.value * 1e3, 1), " ms median of ",
                         jh.baseline.Describe(f.runs), ": +", Fmt(hist_change * 100, 1), " %");
      }
    }
  }
  // Against the job's own recent best: once it held in
  // throughput.persist_windows consecutive windows (early steps vary; the
  // first minute of a healthy job can sit a few percent off its best).
  Streaks::Window held = streaks_.Begin(job.job());
  if (c.degraded && held.Hold("own") < static_cast<int>(Param(v, "throughput.persist_windows")))
    c.degraded = false;
  if (!c.degraded && hist_line.empty()) return;
  Diagnosis d = NewDiagnosis(job, "throughput_regression", Team::kOperations);
  const double change =
      std::max(c.degraded ? c.change : 0.0, hist_line.empty() ? 0.0 : hist_change);
  d.severity = change > 4 * thr ? Severity::kCritical : Severity::kWarning;
  for (const analysis::RankTrace& t : v.ranks) d.ranks.push_back(t.rank);
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "job";
  std::vector<std::string> lines;
  if (c.degraded) {
    lines.push_back(
        absl::StrCat("mean step time of the last ", n, " steps ", Fmt(c.recent_mean_s * 1e3),
                     " ms vs recent best ", n, "-step mean ", Fmt(c.best_mean_s * 1e3),
                     " ms (10th percentile): +", Fmt(c.change * 100, 1), " %, noise of a ", n,
                     "-step mean ", Fmt(c.noise_s * 1e3, 3), " ms"));
  }
  if (!hist_line.empty()) lines.push_back(hist_line);
  d.evidence = absl::StrCat(absl::StrJoin(lines, "; "), " (threshold ", Fmt(thr * 100, 1),
                            " %); steps from ", analysis::StepSourceName(steps.source), " on rank ",
                            ref->rank, ", ", h.size(), " steps of history");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
