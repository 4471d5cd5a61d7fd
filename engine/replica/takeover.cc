#include "engine/replica/takeover.h"

#include <set>
#include <tuple>

#include "common/base/status_macros.h"

namespace xpu::engine::replica {

absl::StatusOr<JobTakeover> LoadTakeover(history::Store& store, const std::string& job) {
  JobTakeover t;
  t.job = job;
  XPU_ASSIGN_OR_RETURN(t.summary, store.LoadJob(job));
  if (!t.summary) return t;  // a new job: nothing to carry
  XPU_ASSIGN_OR_RETURN(const std::vector<history::RankRow> ranks, store.LoadRanks(job));
  for (const history::RankRow& r : ranks) t.rank_records[r.key] = r.records;
  XPU_ASSIGN_OR_RETURN(t.stream_seqs, store.LoadStreamSeqs(job));

  XPU_ASSIGN_OR_RETURN(const std::vector<Diagnosis> diagnoses, store.LoadDiagnoses(job));
  XPU_ASSIGN_OR_RETURN(const std::vector<history::DiagnosisResolution> resolutions,
                       store.LoadDiagnosisResolutions(job));
  XPU_ASSIGN_OR_RETURN(const std::vector<history::AlertDelivery> deliveries,
                       store.LoadAlertDeliveries(job));
  std::map<std::pair<std::string, std::string>, uint64_t> resolved;
  for (const history::DiagnosisResolution& r : resolutions)
    resolved[{r.kind, r.subject}] = r.resolved_ns;
  std::set<std::tuple<std::string, std::string, uint64_t, std::string>> delivered;
  for (const history::AlertDelivery& a : deliveries)
    delivered.insert({a.kind, a.subject, a.first_seen_ns, a.status});
  for (const Diagnosis& d : diagnoses) {
    const bool firing = delivered.count({d.kind, d.subject, d.first_seen_ns, "firing"}) > 0;
    auto r = resolved.find({d.kind, d.subject});
    if (r == resolved.end()) {
      t.active.push_back(JobTakeover::Active{d, firing});
    } else if (firing && !delivered.count({d.kind, d.subject, d.first_seen_ns, "resolved"})) {
      t.undelivered_resolutions.push_back(ResolvedDiagnosis{d, r->second});
    }
  }

  if (!t.summary->job_name.empty()) {
    XPU_ASSIGN_OR_RETURN(
        const std::vector<history::RunBaseline> runs,
        store.LoadRunBaselines(t.summary->job_name, "", /*any_model=*/true, "", 0));
    for (const history::RunBaseline& run : runs) {
      if (run.job == job) t.baseline = run;
    }
  }
  return t;
}

}  // namespace xpu::engine::replica
