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
  u.opened.swap(seeded_open_);
  u.resolved.swap(seeded_resolved_);
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

void DiagnosisTracker::Seed(const Diagnosis& d, bool firing_delivered, int grace_windows) {
  const std::string key = Key(d);
  if (active_.count(key)) return;
  active_.emplace(key, Entry{d, -std::max(0, grace_windows)});
  if (!firing_delivered) seeded_open_.push_back(d);
}

void DiagnosisTracker::SeedResolved(const ResolvedDiagnosis& r) {
  seeded_resolved_.push_back(r);
}

void DiagnosisTracker::Forget(const std::string& job) {
  for (auto it = active_.begin(); it != active_.end();) {
    it = it->second.d.job == job ? active_.erase(it) : std::next(it);
  }
  auto gone = [&](const Diagnosis& d) { return d.job == job; };
  seeded_open_.erase(std::remove_if(seeded_open_.begin(), seeded_open_.end(), gone),
                     seeded_open_.end());
  seeded_resolved_.erase(
      std::remove_if(seeded_resolved_.begin(), seeded_resolved_.end(),
                     [&](const ResolvedDiagnosis& r) { return gone(r.diagnosis); }),
      seeded_resolved_.end());
}

}  // namespace xpu::engine
