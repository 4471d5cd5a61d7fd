#include "engine/state/job_series.h"

namespace xpu::engine {

prometheus::Labels JobLabels(const std::string& job, const std::string& job_name) {
  return {{kJobLabel, job}, {kJobNameLabel, job_name}};
}

prometheus::Labels RankLabels(const prometheus::Labels& job_labels, const std::string& rank,
                              const xpu::v1::ProcessIdentity& id) {
  prometheus::Labels l = job_labels;
  l[kRankLabel] = rank;
  if (!id.host().empty()) l[kHostLabel] = id.host();
  if (id.has_gpu_index()) {
    l[kGpuLabel] = std::to_string(id.gpu_index());
  } else if (id.device() >= 0 && !id.gpu_model().empty()) {
    l[kGpuLabel] = std::to_string(id.device());
  }
  if (!id.gpu_uuid().empty()) l[kUuidLabel] = id.gpu_uuid();
  if (!id.gpu_model().empty()) l[kModelLabel] = id.gpu_model();
  return l;
}


void JobSeries::RemoveAllLocked(const std::string& job) {
  auto j = series_.find(job);
  if (j == series_.end()) return;
  for (auto& [key, e] : j->second) e.Remove();
  series_.erase(j);
}

void JobSeries::RetireJob(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  RemoveAllLocked(job);
  retired_.insert(job);
}

void JobSeries::ReviveJob(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  retired_.erase(job);
}

bool JobSeries::Retired(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  return retired_.count(job) > 0;
}

void JobSeries::ForgetJob(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  RemoveAllLocked(job);
  retired_.erase(job);
}

size_t JobSeries::Count(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto j = series_.find(job);
  return j == series_.end() ? 0 : j->second.size();
}

std::string JobSeries::SlotOf(const prometheus::Labels& labels) {
  std::string s;
  for (const auto& [k, v] : labels) {  // std::map: sorted, so one spelling per set
    s += k;
    s += '\x1f';
    s += v;
    s += '\x1e';
  }
  return s;
}

uint64_t JobSeries::LabelsHash(const prometheus::Labels& labels) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s, unsigned char end) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ end) * 1099511628211ull;
  };
  for (const auto& [k, v] : labels) {
    mix(k, 0x1f);
    mix(v, 0x1e);
  }
  return h;
}

}  // namespace xpu::engine
