#include "engine/window/window_view.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace xpu::engine {

std::string WindowView::HostOf(int32_t rank) const {
  // ranks is sorted by rank (Get): a binary search, so that naming the hosts
  // of many ranks stays linear in the job's size.
  auto it = std::lower_bound(
      ranks.begin(), ranks.end(), rank,
      [](const analysis::RankTrace& t, int32_t r) { return t.rank < r; });
  return it != ranks.end() && it->rank == rank ? it->host : "";
}

const analysis::Steps& WindowView::StepsOf(const analysis::RankTrace& t) const {
  if (ranks.empty() || &t < ranks.data() || &t >= ranks.data() + ranks.size()) {
    scratch_ = analysis::FindSteps(t);
    return scratch_;
  }
  const size_t i = static_cast<size_t>(&t - ranks.data());
  if (steps_.size() != ranks.size()) steps_.resize(ranks.size());
  if (!steps_[i]) steps_[i] = std::make_unique<analysis::Steps>(analysis::FindSteps(t));
  return *steps_[i];
}

const WindowView& WindowViews::Get(const JobState& job) {
  PerJob& pj = jobs_[job.job()];
  if (pj.built && pj.view.window_id == job.window_start_ns()) return pj.view;
  WindowView v;
  v.window_id = job.window_start_ns();
  v.backbone = job.job_name();
  v.first_ns = UINT64_MAX;
  for (const auto& [key, p] : job.processes()) {
    const uint64_t written = p->ring.written();
    uint64_t& cur = pj.cursor[key];
    if (cur > written) cur = 0;  // a restarted rank's ring is new
    const uint64_t fresh = written - cur;
    cur = written;
    if (p->identity.rank() < 0 || fresh == 0) continue;
    analysis::RankTrace t;
    t.rank = p->identity.rank();
    t.host = p->identity.host();
    std::vector<xpu_record_v1> recs = p->ring.Last(static_cast<size_t>(fresh));
    t.ops.reserve(recs.size());
    for (const xpu_record_v1& r : recs) {
      const SignatureInfo* s = p->sigs.Find(r.sig_id);
      if (s == nullptr) continue;
      if (!t.sigs.count(r.sig_id)) t.sigs[r.sig_id] = analysis::OpSigFromAbi(s->abi, s->name);
      const analysis::Op& op = t.ops.emplace_back(analysis::OpFromRecord(r, s->abi.kind));
      v.first_ns = std::min(v.first_ns, op.start_ns);
      v.last_ns = std::max(v.last_ns, op.end_ns());
    }
    v.records += t.ops.size();
    t.Sort();
    v.ranks.push_back(std::move(t));
  }
  if (v.records == 0) v.first_ns = 0;
  std::sort(
      v.ranks.begin(), v.ranks.end(),
      [](const analysis::RankTrace& a, const analysis::RankTrace& b) { return a.rank < b.rank; });
  pj.view = std::move(v);
  pj.built = true;
  return pj.view;
}

void WindowViews::Release(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.view = WindowView{};
  it->second.built = false;
}

void WindowViews::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = keep.count(it->first) ? std::next(it) : jobs_.erase(it);
  }
}

Diagnosis NewDiagnosis(const JobState& job, std::string kind, Team team) {
  Diagnosis d;
  d.job = job.job();
  d.kind = std::move(kind);
  d.team = team;
  d.first_seen_ns = job.window_start_ns();
  d.last_seen_ns = job.window_start_ns();
  return d;
}

std::vector<std::string> HostsOf(const WindowView& v, const std::vector<int32_t>& ranks) {
  std::set<std::string> hosts;
  for (int32_t r : ranks) {
    std::string h = v.HostOf(r);
    if (!h.empty()) hosts.insert(h);
  }
  return {hosts.begin(), hosts.end()};
}

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace xpu::engine
