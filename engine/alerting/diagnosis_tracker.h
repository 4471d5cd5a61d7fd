// diagnosis_tracker — the lifecycle of diagnoses across windows: a finding
// reported again (same job, kind, subject) is the same diagnosis, whose
// first_seen_ns stays and last_seen_ns moves on; one not reported for
// `resolve_after_windows` consecutive windows of its job (or whose job is
// gone) is resolved. A diagnosis still active when its job finished is not
// resolved: it ends with the job (TrackerUpdate::ended), so that history
// keeps it as the state the job ended in (`xpu report` on a finished job).
//
// Engine replicas: a replica that takes a job over seeds the job's active
// diagnoses from the database (Seed), so that their episodes go on with
// their first_seen_ns and are not opened again; one whose firing was never
// delivered, and a resolution never delivered, are announced by the next
// Update. A job that moved to another replica is forgotten (Forget)
// without resolving anything.
//
// Thread-safety: none; owned by the engine and used on the window thread.
#ifndef XPU_ENGINE_ALERTING_DIAGNOSIS_TRACKER_H_
#define XPU_ENGINE_ALERTING_DIAGNOSIS_TRACKER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/state/diagnosis.h"

namespace xpu::engine {

struct ResolvedDiagnosis {
  Diagnosis diagnosis;  // as last reported
  uint64_t resolved_ns = 0;
};

struct TrackerUpdate {
  std::vector<Diagnosis> opened;  // first report
  std::vector<Diagnosis> active;  // every active diagnosis after this window (opened included)
  std::vector<ResolvedDiagnosis> resolved;
  // Active when their job finished; resolved_ns = the window that saw it.
  // Alerts end; history keeps them unresolved.
  std::vector<ResolvedDiagnosis> ended;
};

class DiagnosisTracker {
 public:
  explicit DiagnosisTracker(int resolve_after_windows = 1)
      : resolve_after_(resolve_after_windows < 1 ? 1 : resolve_after_windows) {}

  // One window: `reported` are this window's diagnoses of the jobs in
  // `jobs_ticked` (jobs that were analysed); active diagnoses of other jobs
  // that are not in `jobs_alive` resolve; those of `jobs_finished` that were
  // not reported again end. `reported` is rewritten in place with the
  // tracked first_seen_ns.
  TrackerUpdate Update(std::vector<Diagnosis>* reported, const std::set<std::string>& jobs_ticked,
                       const std::set<std::string>& jobs_alive, uint64_t now_ns,
                       const std::set<std::string>& jobs_finished = {});
  size_t active_count() const { return active_.size(); }

  // An active diagnosis loaded from the database. Unless its firing was
  // delivered it is listed in `opened` of the next Update. It resolves only
  // after `grace_windows` more windows than usual without a report: the
  // windows around a takeover hold only part of the job's records.
  void Seed(const Diagnosis& d, bool firing_delivered, int grace_windows = 0);
  // A resolution loaded from the database whose delivery is not recorded:
  // listed in `resolved` of the next Update.
  void SeedResolved(const ResolvedDiagnosis& r);
  // Drops the job's diagnoses silently (the job moved to another replica).
  void Forget(const std::string& job);

 private:
  struct Entry {
    Diagnosis d;
    int missed = 0;
  };
  static std::string Key(const Diagnosis& d);
  int resolve_after_;
  std::map<std::string, Entry> active_;
  std::vector<Diagnosis> seeded_open_;              // announced by the next Update
  std::vector<ResolvedDiagnosis> seeded_resolved_;  // likewise
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_DIAGNOSIS_TRACKER_H_
