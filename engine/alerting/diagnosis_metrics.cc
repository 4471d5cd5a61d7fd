#include "engine/alerting/diagnosis_metrics.h"

namespace xpu::engine {

DiagnosisMetrics::DiagnosisMetrics(prometheus::Registry& registry)
    : active_(prometheus::BuildGauge()
                  .Name("xpu_diagnosis_active")
                  .Help("Active diagnoses of a job, by kind and team")
                  .Register(registry)),
      total_(prometheus::BuildCounter()
                 .Name("xpu_diagnoses_total")
                 .Help("Diagnoses opened since the engine started, by kind and team")
                 .Register(registry)) {}

void DiagnosisMetrics::Apply(const TrackerUpdate& u, const std::set<std::string>& jobs_alive) {
  for (const Diagnosis& d : u.opened) {
    total_.Add({{"kind", d.kind}, {"team", std::string(TeamName(d.team))}}).Increment();
  }
  std::map<std::tuple<std::string, std::string, std::string>, double> count;
  for (const Diagnosis& d : u.active) count[{d.job, d.kind, std::string(TeamName(d.team))}] += 1;
  for (const auto& key : series_) count.emplace(key, 0.0);  // resolved: 0
  series_.clear();
  for (const auto& [key, n] : count) {
    const auto& [job, kind, team] = key;
    prometheus::Gauge& g = active_.Add({{"job", job}, {"kind", kind}, {"team", team}});
    if (n == 0 && !jobs_alive.count(job)) {
      active_.Remove(&g);
      continue;
    }
    g.Set(n);
    series_.insert(key);
  }
}

}  // namespace xpu::engine
