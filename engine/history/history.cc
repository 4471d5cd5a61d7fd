#include "engine/history/history.h"

#include <set>

#include "common/logging/logging.h"
#include "engine/history/store.h"

namespace xpu::engine::history {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("history");
  return log;
}

}  // namespace

absl::StatusOr<std::vector<RunBaseline>> StoreHistorySource::PreviousRuns(
    const std::string& job_name, const std::string& gpu_model, const std::string& exclude_job,
    int limit) {
  return store_->LoadRunBaselines(job_name, gpu_model, /*any_model=*/false, exclude_job, limit);
}

absl::StatusOr<CalibrationRows> StoreHistorySource::CalibrationOf(const std::string& gpu_model) {
  return store_->LoadCalibration(gpu_model);
}

HistoryCache::HistoryCache(std::shared_ptr<HistorySource> source,
                           std::shared_ptr<const DetectorConfig> config)
    : source_(std::move(source)), config_(std::move(config)) {}

void HistoryCache::Prepare(const JobState& job) {
  std::lock_guard<std::mutex> l(mu_);
  Entry& e = jobs_[job.job()];
  Refresh(job, &e);
  e.prepared_window = job.window_start_ns();
}

const JobHistory& HistoryCache::Get(const JobState& job) {
  std::lock_guard<std::mutex> l(mu_);  // detectors of one job may ask at once
  Entry& e = jobs_[job.job()];
  // Prepared for this window: the job's processes are not read (the
  // detectors that ask run without the job's lock).
  if (e.prepared_window != job.window_start_ns()) Refresh(job, &e);
  return e.history;
}

void HistoryCache::Refresh(const JobState& job, Entry* e) {
  if (e->last_window != job.window_start_ns()) {
    e->last_window = job.window_start_ns();
    e->windows_since_load++;
  }
  const std::string model = job.GpuModel();
  if (!e->loaded || model != e->history.gpu_model || job.job_name() != e->history.job_name ||
      e->windows_since_load >= kReloadWindows) {
    Load(job, model, e);
  }
}

void HistoryCache::Load(const JobState& job, const std::string& gpu_model, Entry* e) {
  e->loaded = true;
  e->windows_since_load = 0;
  JobHistory h;
  h.job_name = job.job_name();
  h.gpu_model = gpu_model;
  if (source_ != nullptr) {
    if (!h.job_name.empty()) {
      const int runs = static_cast<int>(config_->Get("history.runs", h.job_name));
      absl::StatusOr<std::vector<RunBaseline>> prev =
          source_->PreviousRuns(h.job_name, gpu_model, job.job(), runs);
      if (prev.ok()) {
        h.baseline = CombineRuns(*prev);
        h.baseline.job_name = h.job_name;
        h.baseline.gpu_model = gpu_model;
      } else {
        Log()->warn("job {}: cannot load the history of '{}' on '{}': {}", job.job(), h.job_name,
                    gpu_model, std::string(prev.status().message()));
      }
    }
    if (!gpu_model.empty()) {
      absl::StatusOr<CalibrationRows> cal = source_->CalibrationOf(gpu_model);
      if (cal.ok()) {
        h.calibration = CombineCalibration(gpu_model, *cal);
      } else {
        Log()->warn("job {}: cannot load the calibration of '{}': {}", job.job(), gpu_model,
                    std::string(cal.status().message()));
      }
    }
  }
  if (!h.baseline.empty() || !h.calibration.empty()) {
    Log()->debug(
        "job {}: history of '{}' on '{}': {} previous runs, {} GEMM and {} collective calibrations",
        job.job(), h.job_name, gpu_model, h.baseline.runs, h.calibration.gemm.size(),
        h.calibration.collectives.size());
  }
  e->history = std::move(h);
}

void HistoryCache::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = keep.count(it->first) ? std::next(it) : jobs_.erase(it);
  }
}

}  // namespace xpu::engine::history
