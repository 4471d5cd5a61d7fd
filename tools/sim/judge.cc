#include "tools/sim/judge.h"

#include <algorithm>
#include <cmath>

namespace xpu::sim {
namespace {

bool Matches(const DiagnosisSeen& d, const Expectation& e) {
  if (std::find(e.kinds.begin(), e.kinds.end(), d.kind) == e.kinds.end()) return false;
  if (!e.subject_prefix.empty() && d.subject.compare(0, e.subject_prefix.size(),
                                                     e.subject_prefix) != 0) {
    return false;
  }
  std::vector<int32_t> ranks = d.ranks;
  std::sort(ranks.begin(), ranks.end());
  return ranks == e.ranks && d.team == e.team;
}

// Windows from the fault's first window to the report: the engine reports
// at window ends, so the end of the fault's first window is 1. A diagnosis
// made between window ends (hang diagnosis) counts up to the next end.
int WindowsAfter(uint64_t fault_ns, uint64_t seen_ns, uint64_t window_ns) {
  if (seen_ns <= fault_ns) return 0;
  const double w = static_cast<double>(seen_ns - fault_ns) / static_cast<double>(window_ns);
  return static_cast<int>(std::ceil(w - 0.02));
}

}  // namespace

Judgement Judge(const std::vector<FaultSpec>& faults,
                const std::function<int32_t(int32_t)>& ring_next,
                const std::vector<DiagnosisSeen>& seen, uint64_t window0_ns, uint64_t window_ns,
                int max_windows) {
  Judgement j;
  std::vector<bool> explained(seen.size(), false);
  for (const FaultSpec& f : faults) {
    FaultOutcome o;
    o.fault = f;
    o.expect = ExpectationFor(f, ring_next);
    const uint64_t fault_ns = window0_ns + static_cast<uint64_t>(f.at_window) * window_ns;
    for (size_t i = 0; i < seen.size(); ++i) {
      const DiagnosisSeen& d = seen[i];
      if (!Matches(d, o.expect)) continue;
      explained[i] = true;
      const int w = WindowsAfter(fault_ns, d.first_seen_ns, window_ns);
      if (!o.found || w < o.windows) {
        o.found = true;
        o.windows = w;
        o.seconds = d.first_seen_ns > fault_ns
                        ? static_cast<double>(d.first_seen_ns - fault_ns) * 1e-9
                        : 0.0;
        o.matched_kind = d.kind;
      }
    }
    o.in_time = o.found && o.windows <= max_windows;
    j.faults.push_back(o);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (explained[i]) continue;
    if (!faults.empty() && IsSymptomKind(seen[i].kind)) continue;
    j.unexpected.push_back(&seen[i]);
  }
  j.ok = j.unexpected.empty();
  for (const FaultOutcome& o : j.faults) j.ok = j.ok && o.in_time;
  return j;
}

json::Json DiagnosisJson(const DiagnosisSeen& d, uint64_t fault_ns) {
  json::Json j;
  j["kind"] = d.kind;
  j["subject"] = d.subject;
  j["team"] = d.team;
  j["severity"] = d.severity;
  std::vector<int32_t> ranks = d.ranks;
  std::sort(ranks.begin(), ranks.end());
  j["ranks"] = RankListString(ranks);
  j["rank_count"] = ranks.size();
  j["hosts"] = d.hosts;
  j["active"] = d.active;
  if (fault_ns > 0) {
    j["seconds_after_fault"] =
        d.first_seen_ns > fault_ns
            ? json::Fixed(static_cast<double>(d.first_seen_ns - fault_ns) * 1e-9, 2)
            : 0.0;
  }
  j["first_seen_ns"] = d.first_seen_ns;
  return j;
}

json::Json OutcomeJson(const FaultOutcome& o) {
  json::Json j;
  j["kind"] = FaultKindName(o.fault.kind);
  j["ranks"] = RankListString(o.fault.ranks);
  j["at_window"] = o.fault.at_window;
  j["expected_kind"] = o.expect.kinds.empty() ? "" : o.expect.kinds.front();
  if (!o.expect.subject_prefix.empty()) j["expected_subject"] = o.expect.subject_prefix;
  j["expected_team"] = o.expect.team;
  j["expected_ranks"] = RankListString(o.expect.ranks);
  j["found"] = o.found;
  j["in_time"] = o.in_time;
  j["windows_to_diagnosis"] = o.windows;
  j["seconds_to_diagnosis"] = o.seconds >= 0 ? json::Fixed(o.seconds, 2) : -1.0;
  return j;
}

}  // namespace xpu::sim
