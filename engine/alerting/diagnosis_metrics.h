// diagnosis_metrics — diagnoses as Prometheus series on the engine's
// registry:
//   xpu_diagnosis_active{job,kind,team}  active diagnoses (0 once all
//                                        resolved; removed with the job)
//   xpu_diagnoses_total{kind,team}       diagnoses opened since start
// Thread-safety: Apply() from the window thread only.
#ifndef XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_
#define XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "engine/alerting/diagnosis_tracker.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace xpu::engine {

class DiagnosisMetrics {
 public:
  explicit DiagnosisMetrics(prometheus::Registry& registry);
  void Apply(const TrackerUpdate& u, const std::set<std::string>& jobs_alive);

 private:
  prometheus::Family<prometheus::Gauge>& active_;
  prometheus::Family<prometheus::Counter>& total_;
  std::set<std::tuple<std::string, std::string, std::string>> series_;  // job, kind, team
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_
