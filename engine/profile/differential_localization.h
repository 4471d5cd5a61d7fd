// differential_localization — the profile monitor's detector adapter: names
// the abnormal function on the abnormal ranks from a profiling window
// (PerfTracker §4.3; the window itself is profile_monitor.h, the math
// common/analysis/behavior_distance.h).
//
// From the report's abnormal function executions (eq. 11):
//  - abnormal_function: f is abnormal by differential distance on some
//    ranks AND those ranks are slow in f: more critical-path time (beta
//    above the ranks' median by more than XPU_PROFILE_MIN_CHANGE, 15 %) or a
//    slower pace (mu below the median by as much). A rank
//    that is unique only because it spends less time in f (the collective a
//    slow rank hardly waits in, while every other rank waits for it) is a
//    consequence and appears in the evidence, not as a cause. One diagnosis
//    per function, subject "function:<name>", ranks = the slow ranks.
//    Team: a GPU kernel or memory operation slower on some ranks points to
//    their hardware (GPU clocks, thermals, a faulty device) -> operations;
//    a collective kernel slower on some ranks to their links/NICs ->
//    operations; a Python function that takes more of the critical path on
//    some ranks to the training code (uneven work, data, GC) -> algorithm.
//    Critical when a slow rank's beta is at least twice the median or its
//    pace at most half of it.
//  - unexpected_function: f is outside its expected range (D > 0: a Python
//    function above 1 % of the window, a collective above 30 %) without
//    being unique — a problem common to the ranks. Python -> algorithm
//    (CPU-bound training code), collective -> infrastructure (the job is
//    communication-bound: parallelism layout, backbone). Warning. Left out
//    for collectives when the same report names a slow rank: the others'
//    waiting in the collective is then explained by it.
//
// The detector adapter reports the diagnoses of a job's latest report for
// `XPU_PROFILE_REPORT_TTL_S` after its window (the tracker then resolves
// them unless a new window confirms them).
//
// Threading: OnWindow runs on the window thread with the job's lock held; it
// takes only the monitor's lock (never held while taking a job lock).
#ifndef XPU_ENGINE_PROFILE_DIFFERENTIAL_LOCALIZATION_H_
#define XPU_ENGINE_PROFILE_DIFFERENTIAL_LOCALIZATION_H_

#include <vector>

#include "engine/profile/profile_report.h"
#include "engine/window/detector.h"

namespace xpu::engine::profile {

class ProfileMonitor;

// The diagnoses of a finished report (job, ranks, hosts, evidence; the
// times are left to the caller).
std::vector<Diagnosis> DiagnoseProfile(const ProfileReport& report);

class DifferentialLocalizationDetector : public Detector {
 public:
  explicit DifferentialLocalizationDetector(const ProfileMonitor* monitor) : monitor_(monitor) {}
  std::string_view name() const override { return "differential_localization"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  const ProfileMonitor* monitor_;
};

}  // namespace xpu::engine::profile

#endif  // XPU_ENGINE_PROFILE_DIFFERENTIAL_LOCALIZATION_H_
