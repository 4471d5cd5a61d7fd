// history — what the detectors know about a job from outside the job: the
// combined figures of previous runs of the same job name on the same GPU
// model, and the calibration (`xpu calibrate`) of that GPU model.
//
// HistoryCache loads them from a HistorySource (the store) once per job,
// again when the job's GPU model becomes known or changes, and every
// kReloadWindows windows (so that a calibration uploaded while a job runs is
// picked up). Loads read SQLite on the window thread; they are a handful of
// indexed queries per job every few minutes.
// Thread-safety: HistoryCache is used on the window thread only (detectors
// run there, under the job's lock); HistorySource implementations must be
// callable from it.
#ifndef XPU_ENGINE_HISTORY_HISTORY_H_
#define XPU_ENGINE_HISTORY_HISTORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/history/baselines.h"
#include "engine/state/job_state.h"
#include "engine/window/detector_config.h"

namespace xpu::engine::history {

class Store;

class HistorySource {
 public:
  virtual ~HistorySource() = default;
  // Newest first, at most `limit`, never `exclude_job`.
  virtual absl::StatusOr<std::vector<RunBaseline>> PreviousRuns(const std::string& job_name,
                                                                const std::string& gpu_model,
                                                                const std::string& exclude_job,
                                                                int limit) = 0;
  virtual absl::StatusOr<CalibrationRows> CalibrationOf(const std::string& gpu_model) = 0;
};

// The store as a source.
class StoreHistorySource : public HistorySource {
 public:
  explicit StoreHistorySource(Store* store) : store_(store) {}
  absl::StatusOr<std::vector<RunBaseline>> PreviousRuns(const std::string& job_name,
                                                        const std::string& gpu_model,
                                                        const std::string& exclude_job,
                                                        int limit) override;
  absl::StatusOr<CalibrationRows> CalibrationOf(const std::string& gpu_model) override;

 private:
  Store* store_;
};

struct JobHistory {
  std::string job_name;
  std::string gpu_model;
  HistoryBaseline baseline;  // previous runs; empty without a job name or runs
  Calibration calibration;   // of gpu_model; empty without one
};

class HistoryCache {
 public:
  static constexpr int kReloadWindows = 30;

  // `source` may be null (no store): every job then has an empty history.
  HistoryCache(std::shared_ptr<HistorySource> source, std::shared_ptr<const DetectorConfig> config);
  // Loads or refreshes the history of `job` for its current window (caller
  // holds job.mu()): the window tick does it before the detectors run.
  void Prepare(const JobState& job);
  // The history of `job`; thread-safe: detectors of the job running at
  // once get the same history, loaded once per window. Reads only job() and
  // window_start_ns() once Prepare ran for the window (the detectors run
  // without the job's lock); otherwise refreshes it as Prepare does, and the
  // caller holds job.mu().
  const JobHistory& Get(const JobState& job);
  // Forgets jobs the engine no longer has.
  void Retain(const std::vector<std::string>& jobs);

 private:
  struct Entry {
    JobHistory history;
    bool loaded = false;
    uint64_t last_window = 0;      // JobState::window_start_ns() of the last refresh
    uint64_t prepared_window = UINT64_MAX;  // that of the last Prepare, if any
    int windows_since_load = 0;
  };
  void Refresh(const JobState& job, Entry* e);
  void Load(const JobState& job, const std::string& gpu_model, Entry* e);

  std::shared_ptr<HistorySource> source_;
  std::shared_ptr<const DetectorConfig> config_;
  std::mutex mu_;
  std::map<std::string, Entry> jobs_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_HISTORY_H_
