#include "engine/detectors/rank_liveness.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xpu::engine {

void RankLivenessDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const uint64_t now_ns = job.window_start_ns();
  std::vector<int32_t> ranks;
  std::set<std::string> hosts;
  std::vector<std::string> keys;
  uint64_t oldest = UINT64_MAX;
  size_t live_total = 0;
  for (const auto& [key, p] : job.processes()) {
    if (p->liveness == Liveness::kExited) continue;
    ++live_total;
    if (p->liveness != Liveness::kSilent) continue;
    ranks.push_back(p->identity.rank());
    hosts.insert(p->identity.host());
    keys.push_back(key);
    oldest = std::min(oldest, std::max(p->last_record_rx_ns, p->first_seen_ns));
  }
  if (ranks.empty()) return;
  Diagnosis d;
  d.job = job.job();
  d.kind = "rank_silent";
  // Every live rank silent looks like a job-wide hang (or a stopped job); a
  // subset points at those hosts.
  d.team = Team::kOperations;
  d.severity = ranks.size() == live_total ? Severity::kCritical : Severity::kWarning;
  d.ranks = ranks;
  d.hosts.assign(hosts.begin(), hosts.end());
  double silent_s = now_ns > oldest ? (now_ns - oldest) * 1e-9 : 0;
  d.evidence = absl::StrCat(
      ranks.size(), " of ", live_total, " live processes sent no records for more than ",
      silent_after_ns_ / 1000000000ull, " s (longest ", static_cast<uint64_t>(silent_s),
      " s): ", absl::StrJoin(keys, ", "), " on ", absl::StrJoin(hosts, ", "));
  d.first_seen_ns = oldest + silent_after_ns_;
  d.last_seen_ns = now_ns;
  d.subject = absl::StrJoin(keys, ",");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
