// store — the engine's history in SQLite: jobs, ranks, daemons, per-window
// job metric summaries, diagnoses, and the cross-run baselines and
// calibrations of this folder (tables in baseline_sql.h). A
// restarted engine reloads the jobs list from here.
//
// Schema changes go through kMigrations (store.cc): each step runs once, in
// order, inside a transaction, and bumps schema_version. Never edit a shipped
// step; append a new one.
//
// Threading: Enqueue*() is cheap and thread-safe (it moves rows into a queue);
// one background thread owns the write connection and commits everything
// queued in one transaction. Reads (Load*) use their own connection and may
// run on any thread. The WAL journal lets reads proceed during writes.
#ifndef XPU_ENGINE_HISTORY_STORE_H_
#define XPU_ENGINE_HISTORY_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/history/baselines.h"
#include "engine/state/diagnosis.h"
#include "engine/state/job_state.h"
#include "engine/state/registry.h"

struct sqlite3;

namespace xpu::engine::history {

struct RankRow {
  std::string job;
  std::string key;  // ProcessState::key
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  int32_t local_rank = -1;
  std::string liveness;
  uint64_t records = 0;
  uint64_t dropped = 0;
  uint64_t last_record_ns = 0;
  uint64_t last_seen_ns = 0;
};

// A diagnosis that is no longer reported (stored in diagnosis_resolutions;
// a later report of the same job/kind/subject deletes the row again).
struct DiagnosisResolution {
  std::string job;
  std::string kind;
  std::string subject;
  uint64_t resolved_ns = 0;
};

class Store {
 public:
  static constexpr int kSchemaVersion = 3;

  // Opens (creating if needed) and migrates the database at `path`.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();  // flushes and stops the writer

  void EnqueueJob(const JobSummary& j);
  void EnqueueRank(const RankRow& r);
  void EnqueueDaemon(const DaemonState& d);
  void EnqueueWindow(const WindowSummaryRow& w);
  void EnqueueDiagnosis(const Diagnosis& d);
  void EnqueueDiagnosisResolution(const DiagnosisResolution& r);
  // Replaces the baseline rows of run.job and keeps the newest `keep_runs`
  // runs of its (job name, GPU model).
  void EnqueueRunBaseline(const history::RunBaseline& run, int keep_runs);
  void EnqueueCalibration(const history::CalibrationRows& rows);
  // Blocks until everything enqueued before the call is committed; returns
  // the first write error since the previous Flush.
  absl::Status Flush();

  absl::StatusOr<std::vector<JobSummary>> LoadJobs();
  absl::StatusOr<std::vector<RankRow>> LoadRanks(const std::string& job);
  absl::StatusOr<std::vector<Diagnosis>> LoadDiagnoses(const std::string& job);
  absl::StatusOr<std::vector<DiagnosisResolution>> LoadDiagnosisResolutions(const std::string& job);
  absl::StatusOr<std::vector<WindowSummaryRow>> LoadWindows(const std::string& job);
  absl::StatusOr<int> SchemaVersion();
  // Runs of `job_name` on `gpu_model` (any model with `any_model`) except
  // `exclude_job`, newest first, at most `limit` (0: all).
  absl::StatusOr<std::vector<history::RunBaseline>> LoadRunBaselines(const std::string& job_name,
                                                                     const std::string& gpu_model,
                                                                     bool any_model,
                                                                     const std::string& exclude_job,
                                                                     int limit);
  // Calibration rows of `gpu_model` (empty: all models).
  absl::StatusOr<history::CalibrationRows> LoadCalibration(const std::string& gpu_model);

 private:
  struct RunBaselineUpdate {
    history::RunBaseline run;
    int keep_runs = 0;
  };
  using Op = std::variant<JobSummary, RankRow, DaemonState, WindowSummaryRow, Diagnosis,
                          DiagnosisResolution, RunBaselineUpdate, history::CalibrationRows>;
  Store() = default;
  absl::StatusOr<int> SchemaVersionOn(sqlite3* db);
  void Enqueue(Op op);
  void WriterLoop();
  absl::Status Write(const std::vector<Op>& ops);

  sqlite3* write_db_ = nullptr;
  sqlite3* read_db_ = nullptr;
  std::mutex read_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::vector<Op> queue_;
  uint64_t enqueued_ = 0;
  uint64_t committed_ = 0;
  absl::Status error_;
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_STORE_H_
