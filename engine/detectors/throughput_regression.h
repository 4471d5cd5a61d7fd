// throughput_regression — PerfTracker's degradation rule on step times: the
// mean of the last N steps exceeds the recent best N-step mean by more than
// 5 %. Step times come from step markers, else from the periodicity of the
// collective sequence (analysis/steps.h), on the lowest rank that has them.
// The symptom is routed to operations, who triage it with the
// cause-specific diagnoses reported alongside.
#ifndef XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_
#define XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_

#include <deque>
#include <map>
#include <string>

#include "engine/detectors/window_view.h"

namespace xpu::engine {

class ThroughputRegressionDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "throughput_regression"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::map<std::string, std::deque<double>> history_;  // job -> step seconds, oldest first
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_THROUGHPUT_REGRESSION_H_
