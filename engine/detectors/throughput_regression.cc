#include "engine/detectors/throughput_regression.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/analysis/steps.h"

namespace xpu::engine {
namespace {
constexpr size_t kMaxHistory = 4096;
}

void ThroughputRegressionDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const analysis::RankTrace* ref = nullptr;
  analysis::Steps steps;
  for (const analysis::RankTrace& t : v.ranks) {
    steps = analysis::FindSteps(t);
    if (steps.boundaries_ns.size() >= 2) {
      ref = &t;
      break;
    }
  }
  if (ref == nullptr) return;
  std::deque<double>& h = history_[job.job()];
  for (double s : steps.DurationsS()) h.push_back(s);
  while (h.size() > kMaxHistory) h.pop_front();
  const size_t n = static_cast<size_t>(Param(v, "throughput.steps"));
  const double thr = Param(v, "throughput.threshold");
  analysis::ThroughputChange c =
      analysis::DetectThroughputChange(std::vector<double>(h.begin(), h.end()), n, thr);
  if (!c.degraded) return;
  Diagnosis d = NewDiagnosis(job, "throughput_regression", Team::kOperations);
  d.severity = c.change > 4 * thr ? Severity::kCritical : Severity::kWarning;
  for (const analysis::RankTrace& t : v.ranks) d.ranks.push_back(t.rank);
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "job";
  d.evidence = absl::StrCat("mean step time of the last ", n, " steps ", Fmt(c.recent_mean_s * 1e3),
                            " ms vs recent best ", n, "-step mean ", Fmt(c.best_mean_s * 1e3),
                            " ms: +", Fmt(c.change * 100, 1), " % (threshold ", Fmt(thr * 100, 1),
                            " %); steps from ", analysis::StepSourceName(steps.source), " on rank ",
                            ref->rank, ", ", h.size(), " steps of history");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
