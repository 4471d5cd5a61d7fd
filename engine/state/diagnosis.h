// diagnosis — what detectors report: one finding about a job, addressed to
// the team that can act on it.
#ifndef XPU_ENGINE_STATE_DIAGNOSIS_H_
#define XPU_ENGINE_STATE_DIAGNOSIS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xpu::engine {

// kTriage: a symptom without a found cause (an unexplained throughput
// regression): someone has to look before any team can act.
enum class Team { kOperations, kInfrastructure, kAlgorithm, kTriage };
enum class Severity { kInfo, kWarning, kCritical };

inline std::string_view TeamName(Team t) {
  switch (t) {
    case Team::kOperations:
      return "operations";
    case Team::kInfrastructure:
      return "infrastructure";
    case Team::kAlgorithm:
      return "algorithm";
    case Team::kTriage:
      return "triage";
  }
  return "unknown";
}
inline std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "unknown";
}

struct Diagnosis {
  std::string job;
  std::string kind;  // detector-defined, e.g. "rank_silent"
  Team team = Team::kOperations;
  Severity severity = Severity::kWarning;
  std::vector<int32_t> ranks;
  std::vector<std::string> hosts;
  std::string evidence;  // human-readable, with the figures that triggered it
  uint64_t first_seen_ns = 0;
  uint64_t last_seen_ns = 0;
  // Identity of the finding across windows (same job+kind+subject = same
  // diagnosis, its last_seen_ns moves on).
  std::string subject;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_DIAGNOSIS_H_
