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
//
// Failures (a full disk, a locked or read-only file): the rows of a failed
// transaction are kept and retried, with backoff, ahead of newer ones, in a
// buffer bounded by `max_pending_rows`; beyond it the oldest rows are
// dropped and counted. Status() says whether writes are failing (the
// engine's /healthz and `xpu status` show it). Rank checkpoints (record
// counts and positions, EnqueueCheckpoint) are never dropped: they are one
// row per rank, the newest replacing older ones, and their callbacks run
// only once they are durable.
//
// Files: the database and its -wal/-shm files are created with `file_mode`
// (0600; 0640 with a group) and an existing one is brought to it.
#ifndef XPU_ENGINE_HISTORY_STORE_H_
#define XPU_ENGINE_HISTORY_STORE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
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

// A rank's durable delivery state, written by ingest after each batch: the
// records received and the ring position up to which they were. A restarted
// engine resumes from it (RankSeed), so a record sent again is not counted
// twice and one never acknowledged is sent again.
struct RankCheckpoint {
  std::string job;
  std::string key;
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  int32_t local_rank = -1;
  uint64_t start_ticks = 0;
  int64_t uid = -1;
  uint64_t records = 0;
  uint64_t next_position = 0;
  uint64_t undefined_signature = 0;
};

struct StoreOptions {
  size_t max_pending_rows = 200000;
  uint32_t file_mode = 0600;
  int64_t file_gid = -1;       // chown the files to this group (with file_mode 0640)
  uint64_t max_db_bytes = 0;   // SQLite page limit; 0 = none
};

struct StoreStatus {
  bool degraded = false;  // the last write failed
  std::string error;
  uint64_t degraded_since_ns = 0;
  uint64_t write_failures = 0;
  uint64_t rows_pending = 0;
  uint64_t rows_dropped = 0;
};

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
  static constexpr int kSchemaVersion = 4;

  // Opens (creating if needed) and migrates the database at `path`.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
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
  // Rank checkpoints; `on_durable` runs (on the writer thread) once they are
  // committed. Per `ack_key` only the newest callback is kept: an
  // acknowledgement covers everything before it.
  void EnqueueCheckpoint(std::vector<RankCheckpoint> rows, const std::string& ack_key,
                         std::function<void()> on_durable);
  // Blocks until everything enqueued before the call has been tried once;
  // returns the first write error since the previous Flush (failed rows stay
  // queued for retry).
  absl::Status Flush();
  StoreStatus Status() const;

  // What the history knows of `job` for a restarted engine.
  absl::StatusOr<JobSeed> LoadJobSeed(const std::string& job);

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
  using Checkpoints = std::map<std::pair<std::string, std::string>, RankCheckpoint>;
  using Acks = std::map<std::string, std::function<void()>>;
  Store() = default;
  absl::StatusOr<int> SchemaVersionOn(sqlite3* db);
  void Enqueue(Op op);
  void WriterLoop();
  absl::Status Write(const std::vector<Op>& ops, const Checkpoints& checkpoints);
  // After a failed write: keeps what fits the bound for the next try.
  void RetainLocked(std::vector<Op>* ops, Checkpoints* checkpoints, Acks* acks);

  StoreOptions options_;
  sqlite3* write_db_ = nullptr;
  sqlite3* read_db_ = nullptr;
  std::mutex read_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::vector<Op> queue_;
  std::vector<Op> retry_;    // rows of failed writes, oldest first
  Checkpoints checkpoints_;  // newest per rank
  Acks acks_;                // newest per key
  uint64_t enqueued_ = 0;
  uint64_t committed_ = 0;   // enqueued ops tried at least once
  absl::Status error_;
  StoreStatus status_;
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_STORE_H_
