#include "engine/alerting/diagnosis_tracker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xpu::engine {

std::string DiagnosisTracker::Key(const Diagnosis& d) {
  return absl::StrCat(d.job, "\x1f", d.kind, "\x1f", d.subject);
}

TrackerUpdate DiagnosisTracker::Update(std::vector<Diagnosis>* reported,
                                       const std::set<std::string>& jobs_ticked,
                                       const std::set<std::string>& jobs_alive, uint64_t now_ns,
                                       const std::set<std::string>& jobs_finished) {
  TrackerUpdate u;
  std::set<std::string> seen;
  // Several reports of one key in a window (should not happen) collapse to
  // the last one.
  for (Diagnosis& d : *reported) {
    const std::string key = Key(d);
    auto it = active_.find(key);
    if (it == active_.end()) {
      it = active_.emplace(key, Entry{d, 0}).first;
      u.opened.push_back(d);
    } else {
      d.first_seen_ns = std::min(it->second.d.first_seen_ns, d.first_seen_ns);
      it->second.d = d;
      it->second.missed = 0;
    }
    seen.insert(key);
  }
  for (auto it = active_.begin(); it != active_.end();) {
    const Diagnosis& d = it->second.d;
    bool resolve = false;
    if (!seen.count(it->first) && jobs_finished.count(d.job)) {
      u.ended.push_back(ResolvedDiagnosis{d, now_ns});
      it = active_.erase(it);
      continue;
    }
    if (!seen.count(it->first)) {
      if (jobs_ticked.count(d.job)) {
        resolve = ++it->second.missed >= resolve_after_;
      } else if (!jobs_alive.count(d.job)) {
        resolve = true;  // job retired
      }
    }
    if (resolve) {
      u.resolved.push_back(ResolvedDiagnosis{d, now_ns});
      it = active_.erase(it);
    } else {
      u.active.push_back(d);
      ++it;
    }
  }
  return u;
}

}  // namespace xpu::engine
