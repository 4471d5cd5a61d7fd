// throughput_regression — PerfTracker's degradation rule on step times: the
// mean of the last N steps exceeds the recent best N-step mean by more than
// 5 %. Step times come from step markers, else from the periodicity of the
// collective sequence (analysis/steps.h), on the lowest rank that has them.
// With history (engine/history/): the median of the last N steps is also
// compared with the median step time of the previous runs of the same job
// name on the same GPU model (at least history.min_runs of them), so that a
// run that is slow from its first step, which the in-job rule cannot see, is
// reported too. The symptom is routed to operations, who triage it with the
// cause-specific diagnoses reported alongside.
#ifndef XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_
#define XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_

#include <deque>
#include <map>
#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class ThroughputRegressionDetector : public ViewDetector {
 public:
  // `history` may be null: only the in-job rule runs.
  ThroughputRegressionDetector(std::shared_ptr<WindowViews> views,
                               std::shared_ptr<const DetectorConfig> config,
                               std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "throughput_regression"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::shared_ptr<history::HistoryCache> history_;
  std::map<std::string, std::deque<double>> history_steps_;  // job -> step seconds, oldest first
  Streaks streaks_;  // consecutive windows degraded against the job's own best
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_
