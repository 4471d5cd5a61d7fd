// diagnosis_metrics — diagnoses as Prometheus series on the engine's
// registry:
//   xpu_diagnosis_active{xpu_job,xpu_job_name,kind,team}  active diagnoses
//                      (0 once all resolved; removed with the job's series)
//   xpu_diagnoses_total{kind,team}  diagnoses opened since start; every
//                      (kind, team) of kKnownDiagnoses exists from the start
// Thread-safety: Apply() from the window thread only.
#ifndef XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_
#define XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_

#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "engine/alerting/diagnosis_tracker.h"
#include "engine/state/job_series.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace xpu::engine {

// (kind, team) pairs the engine's detectors report (docs/diagnosis-catalogue.md,
// docs/hang-diagnosis.md). Others still get a series when they occur.
extern const std::pair<const char*, const char*> kKnownDiagnoses[];
extern const size_t kKnownDiagnosesCount;

class DiagnosisMetrics {
 public:
  // job_name(job): the job's XPU_JOB_NAME, for xpu_job_name.
  DiagnosisMetrics(prometheus::Registry& registry, JobSeries& series,
                   std::function<std::string(const std::string&)> job_name);
  void Apply(const TrackerUpdate& u, const std::set<std::string>& jobs_alive);

 private:
  JobSeries& series_;
  std::function<std::string(const std::string&)> job_name_;
  prometheus::Family<prometheus::Gauge>& active_;
  prometheus::Family<prometheus::Counter>& total_;
  std::set<std::tuple<std::string, std::string, std::string>> series_keys_;  // job, kind, team
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_DIAGNOSIS_METRICS_H_
