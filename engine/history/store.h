// store — what the engine remembers: jobs, ranks, daemons, per-window job
// metric summaries, diagnoses, the cross-run baselines and calibrations of
// this folder (tables in baseline_sql.h), rank checkpoints, and what engine
// replicas share (the webhook events already delivered; the leases
// themselves are leases.h). A restarted engine reloads from here.
//
// One interface, two backends (sql.h): the embedded SQLite file (default,
// one machine) or PostgreSQL (`postgresql://...`, shared by replicas). The
// same SQL runs on both; schema.h holds the tables and their migrations.
//
// Writes: Enqueue*() is cheap and thread-safe (it moves rows into a
// queue); one background thread owns the write connection and commits
// everything queued in one transaction. Both backends account for failed
// writes the same way: a transaction that fails for a reason of the
// connection (server gone, database locked or full) keeps its rows and is
// tried again with backoff, ahead of newer ones, in a buffer bounded by
// `max_pending_rows` (beyond it the oldest are dropped and counted); one
// that fails because of its data is retried row by row and only the rows
// that fail are dropped (counted). Status() says whether writes are failing
// (the engine's /healthz and `xpu status` show it).
//
// Rank checkpoints (record counts and ring positions, EnqueueCheckpoint)
// are never dropped for lack of room: they are one row per rank, the newest
// replacing older ones, and their callbacks run only once they are durable.
//
// Fencing: with SetFencingOwner(replica), each transaction first locks the
// job_owners rows of that replica and writes the rows of a job only while
// the replica owns it; rows of other jobs are dropped and counted
// (rows_fenced) and their jobs reported to the next barrier, so a replica
// that lost a job to another can never overwrite what the new owner writes.
// A checkpoint of such a job is fenced too, and its callback does not run.
//
// Barriers: EnqueueBarrier(done) calls done() on the writer thread once
// everything enqueued before it is committed, or has failed; the engine
// acknowledges daemon batches from there (docs/architecture.md, "Engine
// replicas").
//
// Reads (Load*) use their own connection and may run on any thread.
//
// Files (SQLite): the database and its -wal/-shm files are created with
// `file_mode` (0600; 0640 with a group) and an existing one is brought to it.
#ifndef XPU_ENGINE_HISTORY_STORE_H_
#define XPU_ENGINE_HISTORY_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/history/baselines.h"
#include "engine/history/schema.h"
#include "engine/history/sql.h"
#include "engine/state/diagnosis.h"
#include "engine/state/job_state.h"
#include "engine/state/registry.h"

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

// A webhook event delivered: the firing or the resolution of one episode
// (job, kind, subject, first_seen_ns) of a diagnosis.
struct AlertDelivery {
  std::string job;
  std::string kind;
  std::string subject;
  uint64_t first_seen_ns = 0;
  std::string status;  // "firing" / "resolved"
  uint64_t delivered_ns = 0;
};

// Write accounting, the same for both backends.
struct WriteStats {
  uint64_t transactions = 0;      // committed
  uint64_t failures = 0;          // transactions that failed (then retried or split)
  uint64_t rows_written = 0;
  uint64_t rows_dropped = 0;      // given up: bad data, or beyond max_pending_rows
  uint64_t rows_fenced = 0;       // rows of jobs this replica no longer owns
  uint64_t rows_pending_retry = 0;
  std::string last_error;         // of the last failure ("" while none)
  bool degraded = false;          // rows are waiting for the database to come back
};

// What a barrier reports: OK when everything before it is committed.
struct BarrierResult {
  absl::Status status;
  std::set<std::string> fenced_jobs;  // jobs whose rows were fenced since the last barrier
};

class Store {
 public:
  static constexpr int kSchemaVersion = history::kSchemaVersion;

  // Opens (creating if needed) and migrates `db`: a PostgreSQL URL
  // (postgresql://user@host:port/db?sslmode=...; the password from
  // ~/.pgpass, PGPASSFILE or passfile=, never the command line) or a
  // SQLite file path (created with options.file_mode).
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& db,
                                                     const StoreOptions& options = {});
  ~Store();  // flushes (bounded by the retry state) and stops the writer

  SqlDialect dialect() const { return dialect_; }
  const std::string& description() const { return description_; }

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
  void EnqueueAlertDelivery(const AlertDelivery& d);
  // Rank checkpoints; `on_durable` runs (on the writer thread) once they are
  // committed. Per `ack_key` only the newest callback is kept: an
  // acknowledgement covers everything before it.
  void EnqueueCheckpoint(std::vector<RankCheckpoint> rows, const std::string& ack_key,
                         std::function<void()> on_durable);
  // Gives `job` up (job_owners) after the rows queued before, in order.
  void EnqueueRelease(const std::string& job, const std::string& owner);
  void EnqueueBarrier(std::function<void(const BarrierResult&)> done);
  // Blocks until everything enqueued before the call is committed, dropped
  // or waiting for a retry; returns the first write error since the
  // previous Flush (failed rows stay queued for retry).
  absl::Status Flush();
  // The same for a backlog of at most `small_backlog` rows; a larger one
  // (a writer behind a large job's rows) is waited for at most `max_wait`.
  // False when rows enqueued before the call are still unwritten then: a
  // query answers from what is committed rather than wait.
  bool FlushFor(std::chrono::milliseconds max_wait, uint64_t small_backlog);
  // Writes rows of a job only while `replica` owns it ("" = no fencing).
  void SetFencingOwner(const std::string& replica);
  StoreStatus Status() const;
  WriteStats write_stats() const;

  // What the history knows of `job` for a restarted engine.
  absl::StatusOr<JobSeed> LoadJobSeed(const std::string& job);

  absl::StatusOr<std::vector<JobSummary>> LoadJobs();
  absl::StatusOr<std::optional<JobSummary>> LoadJob(const std::string& job);
  absl::StatusOr<std::vector<RankRow>> LoadRanks(const std::string& job);
  absl::StatusOr<std::vector<Diagnosis>> LoadDiagnoses(const std::string& job);
  absl::StatusOr<std::vector<DiagnosisResolution>> LoadDiagnosisResolutions(const std::string& job);
  absl::StatusOr<std::vector<WindowSummaryRow>> LoadWindows(const std::string& job);
  absl::StatusOr<std::vector<AlertDelivery>> LoadAlertDeliveries(const std::string& job);
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
  struct Release {
    std::string job;
    std::string owner;
  };
  struct Barrier {
    std::function<void(const BarrierResult&)> done;
  };
  using Op = std::variant<JobSummary, RankRow, DaemonState, WindowSummaryRow, Diagnosis,
                          DiagnosisResolution, RunBaselineUpdate, history::CalibrationRows,
                          AlertDelivery, Release, Barrier>;
  using Checkpoints = std::map<std::pair<std::string, std::string>, RankCheckpoint>;
  // An acknowledgement and the jobs of the checkpoints it waits for.
  struct Ack {
    std::function<void()> fn;
    std::set<std::string> jobs;
  };
  using Acks = std::map<std::string, Ack>;
  // How one attempt at a list of ops ended.
  struct Attempt {
    absl::Status status;
    bool transient = false;
    uint64_t rows = 0;  // data rows written (committed)
    std::set<std::string> fenced_jobs;
    uint64_t fenced_rows = 0;
  };

  Store() = default;
  void Enqueue(Op op);
  void WriterLoop();
  // One batch from the queue (and the retry list): commit, keep for retry,
  // or split; then the barriers among them.
  // True when it failed for a reason of the connection (kept for retry).
  bool WriteBatch(std::vector<Op> ops, Checkpoints checkpoints, Acks acks);
  // The checkpoints (first, in their own transaction when the batch is
  // split); their acknowledgements go to `calls` once durable.
  bool WriteCheckpoints(Checkpoints checkpoints, Acks acks,
                        std::vector<std::function<void()>>* calls);
  Attempt Write(const std::vector<Op>& ops, const Checkpoints& checkpoints);
  // Keeps the failed rows for a retry, within max_pending_rows. Needs mu_.
  void RetainLocked(std::vector<Op>* ops);
  void NoteFailureLocked(const absl::Status& st);
  // A failed attempt's checkpoints and acknowledgements go back (newer
  // ones queued meanwhile win). Needs mu_.
  void RequeueCheckpointsLocked(Checkpoints* checkpoints, Acks* acks);
  // The acknowledgements whose jobs were all written go to `calls`.
  void AcksDurable(Acks* acks, const std::set<std::string>& not_written,
                   std::vector<std::function<void()>>* calls);
  // The rows of a batch a row of which the database refused, one by one.
  // True when the database went away meanwhile (the rest kept for retry).
  bool WriteOneByOne(std::vector<Op> ops, std::vector<std::function<void()>>* calls);
  absl::Status WriteOp(const Op& op);
  // Removes the barriers from `ops`; their callbacks (with `st` and the
  // fenced jobs) go to `calls`, run once mu_ is released. Needs mu_.
  void FinishBarriers(std::vector<Op>& ops, const absl::Status& st,
                      std::vector<std::function<void()>>* calls);

  StoreOptions options_;
  SqlDialect dialect_ = SqlDialect::kSqlite;
  std::string description_;
  std::unique_ptr<SqlConnection> write_db_;  // writer thread only
  std::unique_ptr<SqlConnection> read_db_;   // under read_mu_
  std::mutex read_mu_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::vector<Op> queue_;
  std::vector<Op> retry_;    // rows of failed transactions, oldest first
  Checkpoints checkpoints_;  // newest per rank
  Acks acks_;                // newest per key
  uint64_t enqueued_ = 0;
  uint64_t processed_ = 0;  // committed, dropped or parked for retry
  absl::Status error_;      // first since the last Flush
  std::string fencing_owner_;
  std::set<std::string> fenced_jobs_;  // since the last barrier
  WriteStats stats_;
  uint64_t degraded_since_ns_ = 0;
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_STORE_H_
