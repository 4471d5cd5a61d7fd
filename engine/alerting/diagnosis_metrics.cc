#include "engine/alerting/diagnosis_metrics.h"

#include <map>

namespace xpu::engine {

const std::pair<const char*, const char*> kKnownDiagnoses[] = {
    {"throughput_regression", "triage"},
    {"throughput_regression", "operations"},
    {"throughput_regression", "infrastructure"},
    {"throughput_regression", "algorithm"},
    {"slow_gpu", "operations"},
    {"unoptimized_gemm", "infrastructure"},
    {"slow_link", "operations"},
    {"kernel_issue_stall", "algorithm"},
    {"slow_dataloader", "algorithm"},
    {"void_inter", "algorithm"},
    {"void_minority", "infrastructure"},
    {"extra_gpu_work", "algorithm"},
    {"abnormal_function", "operations"},
    {"abnormal_function", "algorithm"},
    {"unexpected_function", "algorithm"},
    {"unexpected_function", "infrastructure"},
    {"rank_silent", "operations"},
    {"hang_communication", "infrastructure"},
    {"hang_non_communication", "operations"},
    {"hang_non_communication", "algorithm"},
    {"hang_crash", "operations"},
    {"hang_mismatch", "algorithm"},
    {"hang_busy_wait", "operations"},
};
const size_t kKnownDiagnosesCount = sizeof(kKnownDiagnoses) / sizeof(kKnownDiagnoses[0]);

DiagnosisMetrics::DiagnosisMetrics(prometheus::Registry& registry, JobSeries& series,
                                   std::function<std::string(const std::string&)> job_name)
    : series_(series),
      job_name_(std::move(job_name)),
      active_(prometheus::BuildGauge()
                  .Name("xpu_diagnosis_active")
                  .Help("Active diagnoses of a job, by kind and team")
                  .Register(registry)),
      total_(prometheus::BuildCounter()
                 .Name("xpu_diagnoses_total")
                 .Help("Diagnoses opened since the engine started, by kind and team")
                 .Register(registry)) {
  for (const auto& [kind, team] : kKnownDiagnoses) total_.Add({{"kind", kind}, {"team", team}});
}

void DiagnosisMetrics::Apply(const TrackerUpdate& u, const std::set<std::string>& jobs_alive) {
  for (const Diagnosis& d : u.opened) {
    total_.Add({{"kind", d.kind}, {"team", std::string(TeamName(d.team))}}).Increment();
  }
  std::map<std::tuple<std::string, std::string, std::string>, double> count;
  for (const Diagnosis& d : u.active) count[{d.job, d.kind, std::string(TeamName(d.team))}] += 1;
  for (const auto& key : series_keys_) count.emplace(key, 0.0);  // resolved: 0
  series_keys_.clear();
  for (const auto& [key, n] : count) {
    const auto& [job, kind, team] = key;
    const std::string slot = kind + "/" + team;
    if (n == 0 && !jobs_alive.count(job)) {
      series_.Remove(job, active_, slot);
      continue;
    }
    prometheus::Labels l = JobLabels(job, job_name_(job));
    l["kind"] = kind;
    l["team"] = team;
    if (prometheus::Gauge* g = series_.Get(job, active_, slot, l)) {
      g->Set(n);
      series_keys_.insert(key);
    }
  }
}

}  // namespace xpu::engine
