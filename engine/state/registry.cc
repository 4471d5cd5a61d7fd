#include "engine/state/registry.h"

#include <time.h>

#include <algorithm>
#include <cstdint>

#include "common/base/clock.h"

namespace xpu::engine {

Clock RealtimeClock() {
  return [] { return RealtimeNs(); };
}

Registry::Registry(Clock clock, uint64_t silent_after_ns, size_t ring_capacity)
    : clock_(std::move(clock)), silent_after_ns_(silent_after_ns), ring_capacity_(ring_capacity) {}

std::shared_ptr<JobState> Registry::GetOrCreateJob(const std::string& job,
                                                   const std::string& job_name) {
  return GetOrCreateJob(job, job_name, SIZE_MAX);
}

std::shared_ptr<JobState> Registry::GetOrCreateJob(const std::string& job,
                                                   const std::string& job_name, size_t max_jobs) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(job);
  if (it != jobs_.end()) return it->second;
  if (jobs_.size() >= max_jobs) return nullptr;
  auto created = std::make_shared<JobState>(job, job_name, ring_capacity_, clock_());
  // Seeded before any other thread can see the job, so that no process of
  // it is created without its history.
  if (seeder_) {
    created->SetSeed(seeder_(job));
  } else if (auto h = history_.find(job); h != history_.end()) {
    JobSeed seed;
    seed.owner_uid = h->second.owner_uid;
    created->SetSeed(std::move(seed));
  }
  jobs_.emplace(job, created);
  return created;
}

bool Registry::DropJob(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  summaries_.erase(job);
  return jobs_.erase(job) > 0;
}

void Registry::SetJobSeeder(std::function<JobSeed(const std::string& job)> seeder) {
  std::lock_guard<std::mutex> l(mu_);
  seeder_ = std::move(seeder);
}

std::optional<int64_t> Registry::JobOwner(const std::string& job) const {
  std::shared_ptr<JobState> j;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = jobs_.find(job);
    if (it == jobs_.end()) {
      auto h = history_.find(job);
      if (h == history_.end()) return std::nullopt;
      return h->second.owner_uid;
    }
    j = it->second;
  }
  return j->owner_uid();  // atomic: the job's lock is not taken
}

size_t Registry::JobCount() const {
  std::lock_guard<std::mutex> l(mu_);
  return jobs_.size();
}

std::shared_ptr<JobState> Registry::FindJob(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<JobState>> Registry::Jobs() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::shared_ptr<JobState>> out;
  out.reserve(jobs_.size());
  for (const auto& [k, j] : jobs_) out.push_back(j);
  return out;
}

void Registry::DaemonConnected(const std::string& id, const std::string& host,
                               const std::string& version) {
  std::lock_guard<std::mutex> l(mu_);
  DaemonState& d = daemons_[id];
  uint64_t now = clock_();
  if (d.daemon_id.empty()) d.first_seen_ns = now;
  d.daemon_id = id;
  d.host = host;
  d.version = version;
  d.connected = true;
  d.silent = false;
  d.last_seen_ns = now;
}

void Registry::DaemonDisconnected(const std::string& id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = daemons_.find(id);
  if (it != daemons_.end()) it->second.connected = false;
}

void Registry::DaemonSeen(const std::string& id, uint64_t batches, uint64_t records,
                          uint64_t records_dropped_cumulative) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = daemons_.find(id);
  if (it == daemons_.end()) return;
  DaemonState& d = it->second;
  d.last_seen_ns = clock_();
  d.silent = false;
  d.batches += batches;
  d.records += records;
  d.records_dropped = std::max(d.records_dropped, records_dropped_cumulative);
}

std::vector<DaemonState> Registry::Daemons() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<DaemonState> out;
  for (const auto& [k, d] : daemons_) out.push_back(d);
  return out;
}

size_t Registry::DaemonsConnected() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (const auto& [k, d] : daemons_) n += d.connected;
  return n;
}

void Registry::AddHistoricalJob(const JobSummary& s) {
  std::lock_guard<std::mutex> l(mu_);
  history_[s.job] = s;
}

JobSummary Summarize(const JobState& job) {
  JobSummary s;
  s.job = job.job();
  s.job_name = job.job_name();
  s.ranks = static_cast<uint32_t>(job.processes().size());
  s.ranks_alive = static_cast<uint32_t>(job.Alive());
  s.first_seen_ns = job.first_seen_ns();
  s.last_seen_ns = job.last_seen_ns();
  s.records = job.records();
  s.state = std::string(job.StateName());
  s.dropped = job.Dropped();
  s.owner_uid = job.owner_uid();
  s.analysed_until_ns = job.analysed_until_ns();
  s.records_late = job.late_records();
  s.lost = job.Lost();
  return s;
}

bool Registry::CachedSummary(const std::string& job, JobSummary* out) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = summaries_.find(job);
  if (it == summaries_.end()) return false;
  *out = it->second;
  return true;
}

std::vector<JobSummary> Registry::JobSummaries(bool include_finished) const {
  std::vector<std::shared_ptr<JobState>> jobs;
  std::map<std::string, JobSummary> history;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [k, j] : jobs_) jobs.push_back(j);
    if (include_finished) history = history_;
  }
  std::vector<JobSummary> out;
  for (const auto& j : jobs) {
    JobSummary s;
    std::unique_lock<std::mutex> jl(j->mu(), std::try_to_lock);
    if (jl.owns_lock()) {
      s = Summarize(*j);
    } else if (!CachedSummary(j->job(), &s)) {
      jl.lock();  // never summarized yet: wait for the job
      s = Summarize(*j);
    }
    if (jl.owns_lock()) jl.unlock();
    s.analysed_until_ns = j->analysed_until_ns();  // a cached summary's may be old
    history.erase(s.job);
    if (!include_finished && s.state == "finished") continue;
    out.push_back(std::move(s));
  }
  for (auto& [k, h] : history) {
    // A job not live in this engine run cannot be running: whatever the
    // store said last, it is over as far as we know.
    if (h.state != "finished") h.state = "finished";
    h.ranks_alive = 0;
    out.push_back(h);
  }
  std::sort(out.begin(), out.end(), [](const JobSummary& a, const JobSummary& b) {
    return a.first_seen_ns != b.first_seen_ns ? a.first_seen_ns < b.first_seen_ns : a.job < b.job;
  });
  return out;
}

void Registry::UpdateLiveness() {
  const uint64_t now = clock_();
  std::vector<std::shared_ptr<JobState>> jobs;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [k, d] : daemons_) {
      d.silent = d.connected && now > d.last_seen_ns && now - d.last_seen_ns > silent_after_ns_;
    }
    for (const auto& [k, j] : jobs_) jobs.push_back(j);
  }
  for (const auto& j : jobs) {
    JobSummary s;
    {
      std::lock_guard<std::mutex> jl(j->mu());
      j->UpdateLiveness(now, silent_after_ns_);
      s = Summarize(*j);
    }
    std::lock_guard<std::mutex> l(mu_);
    summaries_[s.job] = std::move(s);
  }
}

std::vector<std::string> Registry::RetireFinishedJobs(uint64_t retain_ns) {
  const uint64_t now = clock_();
  std::vector<std::string> retired;
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobSummary s;
    {
      std::lock_guard<std::mutex> jl(it->second->mu());
      s = Summarize(*it->second);
    }
    if (s.state == "finished" && now > s.last_seen_ns && now - s.last_seen_ns > retain_ns) {
      history_[s.job] = s;
      summaries_.erase(s.job);
      retired.push_back(s.job);
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  return retired;
}

}  // namespace xpu::engine
