// engine/profile/profile_report.h — the result of one profiling window over
// a job (profile_monitor.h): what each rank's daemon answered, the
// behaviour patterns and distances of the functions that matter, the
// abnormal function executions (PerfTracker eq. 11) and the diagnoses made
// of them (differential_localization.h). `xpu profile` prints
// Text() or Json().
//
// JSON (stable field names):
//   {job, trigger, requested_ns, finished_ns, window_ms, daemons_asked,
//    daemons_answered, ranks_profiled, ranks_skipped, skipped_reason,
//    ranks: [{rank, host, pid, status, reason, window_start_ns,
//             window_end_ns, t_ms, iterations, step_source, kernel_records,
//             kernels_dropped, cupti_finalized, functions}],
//    functions: [{name, class, reference_us, beta_median, mu_median, M, MAD,
//                 ranks: [{rank, beta, mu, sigma, D, Delta}]}],   (top by beta)
//    findings: [{function, class, rank, host, beta, mu, sigma, D, Delta, M,
//                MAD, beta_median, mu_median, by_expectation, by_difference,
//                more_time, slower, cause}],
//    diagnoses: [{kind, subject, team, severity, ranks, hosts, evidence}]}
//
// Thread-safety: a value.
#ifndef XPU_ENGINE_PROFILE_PROFILE_REPORT_H_
#define XPU_ENGINE_PROFILE_PROFILE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/analysis/behavior_distance.h"
#include "engine/state/diagnosis.h"

namespace xpu::engine::profile {

struct ProfileRank {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string status;  // done, skipped_other_client, unavailable, ..., no_reply
  std::string reason;
  uint64_t window_start_ns = 0, window_end_ns = 0;
  uint64_t t_ns = 0;  // |T|
  uint32_t iterations = 0;
  std::string step_source;
  uint64_t kernel_records = 0;
  uint64_t kernels_dropped = 0;
  bool cupti_finalized = false;
  size_t functions = 0;
};

// Every rank's figures for one function (ranks_profiled order).
struct FunctionRow {
  std::string name;  // as CUPTI / the Python side named it
  analysis::FunctionClass cls = analysis::FunctionClass::kGpuCompute;
  uint64_t reference_ns = 0;
  double beta_median = 0, mu_median = 0, M = 0, MAD = 0;
  std::vector<int32_t> ranks;
  std::vector<analysis::Pattern> patterns;
  std::vector<double> D, Delta;
};

// One abnormal function execution (f on rank w).
struct ProfileFinding {
  std::string function;
  analysis::FunctionClass cls = analysis::FunctionClass::kGpuCompute;
  int32_t rank = -1;
  std::string host;
  analysis::Pattern pattern;
  double D = 0, Delta = 0, M = 0, MAD = 0, beta_median = 0, mu_median = 0;
  bool by_expectation = false, by_difference = false, more_time = false, slower = false;
  // Differs from the others because it is slow in f (more time or a slower
  // pace), not because it waits less for them.
  bool cause() const { return by_difference && (more_time || slower); }
};

struct ProfileReport {
  std::string job;
  std::string trigger;  // "throughput_regression" or "on_demand"
  uint64_t requested_ns = 0, finished_ns = 0;
  uint32_t window_ms = 0;
  uint32_t daemons_asked = 0, daemons_answered = 0;
  std::vector<ProfileRank> ranks;
  std::vector<FunctionRow> functions;  // those with beta > min_beta somewhere, largest first
  std::vector<ProfileFinding> findings;
  std::vector<Diagnosis> diagnoses;

  size_t ranks_profiled() const;
  // "skipped: another CUPTI client is active" when every rank that did not
  // run a window says the same; else the most common reason ("" if none).
  std::string SkippedReason() const;
  std::string Json() const;
  std::string Text() const;
};

// Demangled (when it is a C++ symbol) and cut to `max` characters.
std::string DisplayName(const std::string& name, size_t max = 160);

}  // namespace xpu::engine::profile

#endif  // XPU_ENGINE_PROFILE_PROFILE_REPORT_H_
