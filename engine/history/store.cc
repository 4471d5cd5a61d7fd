#include "engine/history/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/logging/logging.h"
#include "engine/history/baseline_sql.h"
#include "engine/history/sqlite_util.h"

namespace xpu::engine::history {
namespace {

// Append-only list of schema steps; step i brings the schema to version i+1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  job TEXT PRIMARY KEY, job_name TEXT NOT NULL, first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL, ranks INTEGER NOT NULL, records INTEGER NOT NULL,
  state TEXT NOT NULL);
CREATE TABLE ranks (
  job TEXT NOT NULL, key TEXT NOT NULL, rank INTEGER NOT NULL, host TEXT NOT NULL,
  pid INTEGER NOT NULL, local_rank INTEGER NOT NULL, liveness TEXT NOT NULL,
  records INTEGER NOT NULL, dropped INTEGER NOT NULL, last_record_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL, PRIMARY KEY (job, key));
CREATE TABLE daemons (
  daemon_id TEXT PRIMARY KEY, host TEXT NOT NULL, version TEXT NOT NULL,
  first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, batches INTEGER NOT NULL,
  records INTEGER NOT NULL, records_dropped INTEGER NOT NULL);
CREATE TABLE window_summaries (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, window_end_ns INTEGER NOT NULL,
  records INTEGER NOT NULL, kernels INTEGER NOT NULL, gemms INTEGER NOT NULL,
  collectives INTEGER NOT NULL, memcpys INTEGER NOT NULL, syncs INTEGER NOT NULL,
  host_events INTEGER NOT NULL, other INTEGER NOT NULL, PRIMARY KEY (job, window_start_ns));
CREATE TABLE window_gemm (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, signature TEXT NOT NULL,
  count INTEGER NOT NULL, total_ns INTEGER NOT NULL, flops REAL NOT NULL, tflops REAL NOT NULL,
  PRIMARY KEY (job, window_start_ns, signature));
CREATE TABLE window_collective (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, op TEXT NOT NULL,
  count INTEGER NOT NULL, bus_bytes REAL NOT NULL, seconds REAL NOT NULL,
  busbw_bytes_per_second REAL NOT NULL, PRIMARY KEY (job, window_start_ns, op));
CREATE TABLE diagnoses (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, team TEXT NOT NULL,
  severity TEXT NOT NULL, ranks TEXT NOT NULL, hosts TEXT NOT NULL, evidence TEXT NOT NULL,
  first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    // 2: diagnoses that stopped being reported (resolved), for the active
    // flag of Query.Diagnoses and `xpu diagnose`.
    R"sql(
CREATE TABLE diagnosis_resolutions (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, resolved_ns INTEGER NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    // 3: history baselines per (job name, GPU model) and `xpu calibrate`
    // results per GPU model (engine/history/baseline_sql.h).
    R"sql(
CREATE TABLE baseline_runs (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, updated_ns INTEGER NOT NULL,
  windows INTEGER NOT NULL, steps INTEGER NOT NULL, step_median_s REAL NOT NULL,
  step_best_s REAL NOT NULL, void_inter REAL NOT NULL, void_minority REAL NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job));
CREATE INDEX baseline_runs_by_time ON baseline_runs (job_name, gpu_model, updated_ns);
CREATE TABLE baseline_gemm (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, signature TEXT NOT NULL,
  dtype TEXT NOT NULL, tflops REAL NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, signature));
CREATE TABLE baseline_collective (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, op TEXT NOT NULL,
  bytes INTEGER NOT NULL, nranks INTEGER NOT NULL, nodes INTEGER NOT NULL,
  busbw_bytes_per_second REAL NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, op, bytes, nranks, nodes));
CREATE TABLE baseline_issue_latency (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, family TEXT NOT NULL,
  bucket INTEGER NOT NULL, count INTEGER NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, family, bucket));
CREATE TABLE calibration_gemm (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, dtype TEXT NOT NULL, tflops REAL NOT NULL,
  tflops_min REAL NOT NULL, m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  devices INTEGER NOT NULL, measured_ns INTEGER NOT NULL,
  PRIMARY KEY (gpu_model, host, dtype));
CREATE TABLE calibration_collective (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, op TEXT NOT NULL, bytes INTEGER NOT NULL,
  nranks INTEGER NOT NULL, nodes INTEGER NOT NULL, time_us REAL NOT NULL,
  algbw_bytes_per_second REAL NOT NULL, busbw_bytes_per_second REAL NOT NULL,
  measured_ns INTEGER NOT NULL,
  PRIMARY KEY (gpu_model, host, op, bytes, nranks, nodes));
)sql",
    // 4: what a restarted engine needs to count every record once (rank
    // checkpoints: position, process start time), who owns a job, and the
    // losses of a job.
    R"sql(
ALTER TABLE ranks ADD COLUMN next_position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN start_ticks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN uid INTEGER NOT NULL DEFAULT -1;
ALTER TABLE ranks ADD COLUMN undefined_signature INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN uid INTEGER NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Store::kSchemaVersion,
              "kSchemaVersion must equal the number of migration steps");

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("store");
  return log;
}

absl::StatusOr<sqlite3*> OpenDb(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    absl::Status st = absl::UnavailableError(absl::StrCat(
        "cannot open database ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return st;
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

}  // namespace

// Creates the database file with `mode` (never through a symlink) and
// brings an existing one, and its WAL files, to it: history holds every
// job's names, hosts and diagnoses. SQLite gives the -wal and -shm files it
// creates the main file's permissions.
absl::Status PrepareFiles(const std::string& path, const StoreOptions& o) {
  if (path == ":memory:" || path.empty()) return absl::OkStatus();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, o.file_mode);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open database ", path, ": ", strerror(errno)));
  }
  absl::Status st = absl::OkStatus();
  if (o.file_gid >= 0 && fchown(fd, static_cast<uid_t>(-1), static_cast<gid_t>(o.file_gid)) != 0) {
    st = absl::PermissionDeniedError(
        absl::StrCat("chgrp ", o.file_gid, " ", path, ": ", strerror(errno)));
  }
  if (st.ok() && fchmod(fd, o.file_mode) != 0) {
    st = absl::PermissionDeniedError(absl::StrCat("chmod ", path, ": ", strerror(errno)));
  }
  close(fd);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string side = path + suffix;
    const int sfd = open(side.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) continue;
    if (o.file_gid >= 0) (void)!fchown(sfd, static_cast<uid_t>(-1), static_cast<gid_t>(o.file_gid));
    (void)!fchmod(sfd, o.file_mode);
    close(sfd);
  }
  return st;
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  std::unique_ptr<Store> s(new Store());
  s->options_ = options;
  XPU_RETURN_IF_ERROR(PrepareFiles(path, options));
  XPU_ASSIGN_OR_RETURN(s->write_db_, OpenDb(path));
  XPU_RETURN_IF_ERROR(Exec(s->write_db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  if (options.max_db_bytes > 0) {
    XPU_RETURN_IF_ERROR(Exec(
        s->write_db_,
        absl::StrCat("PRAGMA max_page_count=", std::max<uint64_t>(16, options.max_db_bytes / 4096),
                     ";")
            .c_str()));
  }
  XPU_RETURN_IF_ERROR(
      Exec(s->write_db_, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);"));
  XPU_ASSIGN_OR_RETURN(const int version, s->SchemaVersionOn(s->write_db_));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", path, " has schema version ", version, ", newer than this engine's ",
        kSchemaVersion, "; use a newer xpu-engine or another --db"));
  }
  for (int step = version; step < kSchemaVersion; ++step) {
    std::string sql = absl::StrCat("BEGIN;", kMigrations[step], "DELETE FROM schema_version;",
                                   "INSERT INTO schema_version VALUES (", step + 1, ");COMMIT;");
    if (auto st = Exec(s->write_db_, sql.c_str()); !st.ok()) {
      Exec(s->write_db_, "ROLLBACK;").IgnoreError();
      return absl::InternalError(
          absl::StrCat("migrating ", path, " to schema ", step + 1, ": ", st.message()));
    }
  }
  XPU_ASSIGN_OR_RETURN(s->read_db_, OpenDb(path));
  s->writer_ = std::thread([p = s.get()] { p->WriterLoop(); });
  return s;
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  sqlite3_close(read_db_);
  sqlite3_close(write_db_);
}

absl::StatusOr<int> Store::SchemaVersionOn(sqlite3* db) {
  Stmt q(db, "SELECT MAX(version) FROM schema_version;");
  if (!q.ok()) return SqlError(db, "schema_version");
  XPU_ASSIGN_OR_RETURN(const bool row, q.Step());
  return row ? static_cast<int>(q.Int(0)) : 0;
}

absl::StatusOr<int> Store::SchemaVersion() {
  std::lock_guard<std::mutex> l(read_mu_);
  return SchemaVersionOn(read_db_);
}

void Store::Enqueue(Op op) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(op));
    ++enqueued_;
  }
  cv_.notify_one();
}
void Store::EnqueueJob(const JobSummary& j) { Enqueue(j); }
void Store::EnqueueRank(const RankRow& r) { Enqueue(r); }
void Store::EnqueueDaemon(const DaemonState& d) { Enqueue(d); }
void Store::EnqueueWindow(const WindowSummaryRow& w) { Enqueue(w); }
void Store::EnqueueDiagnosis(const Diagnosis& d) { Enqueue(d); }
void Store::EnqueueDiagnosisResolution(const DiagnosisResolution& r) { Enqueue(r); }
void Store::EnqueueRunBaseline(const history::RunBaseline& run, int keep_runs) {
  Enqueue(RunBaselineUpdate{run, keep_runs});
}
void Store::EnqueueCalibration(const history::CalibrationRows& rows) { Enqueue(rows); }

void Store::EnqueueCheckpoint(std::vector<RankCheckpoint> rows, const std::string& ack_key,
                              std::function<void()> on_durable) {
  {
    std::lock_guard<std::mutex> l(mu_);
    for (RankCheckpoint& r : rows) {
      auto key = std::make_pair(r.job, r.key);
      checkpoints_[key] = std::move(r);
    }
    if (on_durable) acks_[ack_key] = std::move(on_durable);
  }
  cv_.notify_one();
}

absl::Status Store::Flush() {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = enqueued_;
  cv_.notify_one();
  done_cv_.wait(l, [&] { return committed_ >= target || stop_; });
  absl::Status st = error_;
  error_ = absl::OkStatus();
  return st;
}

StoreStatus Store::Status() const {
  std::lock_guard<std::mutex> l(mu_);
  StoreStatus st = status_;
  st.rows_pending = queue_.size() + retry_.size() + checkpoints_.size();
  return st;
}

void Store::RetainLocked(std::vector<Op>* ops, Checkpoints* checkpoints, Acks* acks) {
  // Newer checkpoints and acknowledgements queued meanwhile win.
  for (auto& [key, row] : *checkpoints) checkpoints_.emplace(key, std::move(row));
  for (auto& [key, fn] : *acks) acks_.emplace(key, std::move(fn));
  std::vector<Op> keep = std::move(*ops);
  const size_t bound = options_.max_pending_rows;
  const size_t total = keep.size() + queue_.size();
  if (total > bound) {
    // The oldest rows go first; they are counted, never silently lost.
    const size_t drop = std::min(keep.size(), total - bound);
    status_.rows_dropped += drop;
    keep.erase(keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(drop));
    Log()->error("history: {} rows dropped, the retry buffer ({} rows) is full", drop, bound);
  }
  retry_ = std::move(keep);
}

void Store::WriterLoop() {
  std::unique_lock<std::mutex> l(mu_);
  uint64_t backoff_ms = 0;
  while (true) {
    auto work = [&] {
      return stop_ || !queue_.empty() || !checkpoints_.empty() || !retry_.empty();
    };
    if (backoff_ms > 0) {
      // Retry after the backoff, or at once on stop (one last try).
      cv_.wait_for(l, std::chrono::milliseconds(backoff_ms), [&] { return stop_; });
    } else {
      cv_.wait(l, work);
    }
    if (!stop_ && !work()) continue;
    if (queue_.empty() && checkpoints_.empty() && retry_.empty()) {
      if (stop_) break;
      continue;
    }
    std::vector<Op> ops = std::move(retry_);
    retry_.clear();
    const size_t fresh = queue_.size();
    for (Op& op : queue_) ops.push_back(std::move(op));
    queue_.clear();
    Checkpoints checkpoints;
    checkpoints.swap(checkpoints_);
    Acks acks;
    acks.swap(acks_);
    l.unlock();
    absl::Status st = Write(ops, checkpoints);
    if (st.ok()) {
      for (auto& [key, fn] : acks) fn();  // durable: the daemons may forget these
    }
    l.lock();
    committed_ += fresh;
    if (st.ok()) {
      if (status_.degraded) Log()->info("history writes succeed again");
      status_.degraded = false;
      status_.error.clear();
      backoff_ms = 0;
    } else {
      ++status_.write_failures;
      if (!status_.degraded) {
        status_.degraded_since_ns = RealtimeNs();
        Log()->error("history write failed, rows kept for retry: {}", std::string(st.message()));
      }
      status_.degraded = true;
      status_.error = std::string(st.message());
      if (error_.ok()) error_ = st;
      if (stop_) {
        status_.rows_dropped += ops.size() + checkpoints.size();
        Log()->error("stopping: {} history rows could not be written", ops.size());
      } else {
        RetainLocked(&ops, &checkpoints, &acks);
        backoff_ms = std::min<uint64_t>(std::max<uint64_t>(250, backoff_ms * 2), 5000);
      }
    }
    done_cv_.notify_all();
    if (stop_ && st.ok() && queue_.empty() && checkpoints_.empty()) break;
    if (stop_ && !st.ok()) break;
  }
  done_cv_.notify_all();
}

namespace {

// One queued row each (Store::Write runs them in one transaction).
absl::Status WriteRow(sqlite3* db, const JobSummary& j) {
  Stmt s(db,
         "INSERT INTO jobs (job, job_name, first_seen_ns, last_seen_ns, ranks, records, state, "
         "uid, dropped) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9) ON CONFLICT(job) DO UPDATE SET "
         "job_name=?2, first_seen_ns=MIN(first_seen_ns,?3), last_seen_ns=?4, ranks=?5, "
         "records=?6, state=?7, uid=CASE WHEN ?8 >= 0 THEN ?8 ELSE uid END, dropped=?9;");
  return s.Bind(1, j.job)
      .Bind(2, j.job_name)
      .Bind(3, j.first_seen_ns)
      .Bind(4, j.last_seen_ns)
      .Bind(5, j.ranks)
      .Bind(6, j.records)
      .Bind(7, j.state)
      .Bind(8, j.owner_uid)
      .Bind(9, j.dropped)
      .Run();
}

// The record count of an existing rank belongs to its checkpoints (exact
// across restarts): the window's row updates everything else.
absl::Status WriteRow(sqlite3* db, const RankRow& r) {
  Stmt s(db,
         "INSERT INTO ranks (job, key, rank, host, pid, local_rank, liveness, records, dropped, "
         "last_record_ns, last_seen_ns) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) "
         "ON CONFLICT(job, key) DO UPDATE SET rank=?3, host=?4, pid=?5, local_rank=?6, "
         "liveness=?7, dropped=?9, last_record_ns=?10, last_seen_ns=?11;");
  return s.Bind(1, r.job)
      .Bind(2, r.key)
      .Bind(3, r.rank)
      .Bind(4, r.host)
      .Bind(5, r.pid)
      .Bind(6, r.local_rank)
      .Bind(7, r.liveness)
      .Bind(8, r.records)
      .Bind(9, r.dropped)
      .Bind(10, r.last_record_ns)
      .Bind(11, r.last_seen_ns)
      .Run();
}

absl::Status WriteRow(sqlite3* db, const DaemonState& d) {
  Stmt s(db, "INSERT OR REPLACE INTO daemons VALUES (?1,?2,?3,?4,?5,?6,?7,?8);");
  return s.Bind(1, d.daemon_id)
      .Bind(2, d.host)
      .Bind(3, d.version)
      .Bind(4, d.first_seen_ns)
      .Bind(5, d.last_seen_ns)
      .Bind(6, d.batches)
      .Bind(7, d.records)
      .Bind(8, d.records_dropped)
      .Run();
}

// The window's summary, then its GEMM and collective rows.
absl::Status WriteRow(sqlite3* db, const WindowSummaryRow& w) {
  Stmt s(db,
         "INSERT OR REPLACE INTO window_summaries VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11);");
  absl::Status st = s.Bind(1, w.job)
                        .Bind(2, w.window_start_ns)
                        .Bind(3, w.window_end_ns)
                        .Bind(4, w.records)
                        .Bind(5, w.kinds.kernel)
                        .Bind(6, w.kinds.gemm)
                        .Bind(7, w.kinds.collective)
                        .Bind(8, w.kinds.memcpy)
                        .Bind(9, w.kinds.sync)
                        .Bind(10, w.kinds.host)
                        .Bind(11, w.kinds.other)
                        .Run();
  for (const GemmWindowRow& g : w.gemm) {
    if (!st.ok()) break;
    Stmt sg(db, "INSERT OR REPLACE INTO window_gemm VALUES (?1,?2,?3,?4,?5,?6,?7);");
    st = sg.Bind(1, w.job)
             .Bind(2, w.window_start_ns)
             .Bind(3, g.signature)
             .Bind(4, g.count)
             .Bind(5, g.total_ns)
             .Bind(6, g.flops)
             .Bind(7, g.Tflops())
             .Run();
  }
  for (const CollectiveWindowRow& c : w.collectives) {
    if (!st.ok()) break;
    Stmt sc(db, "INSERT OR REPLACE INTO window_collective VALUES (?1,?2,?3,?4,?5,?6,?7);");
    st = sc.Bind(1, w.job)
             .Bind(2, w.window_start_ns)
             .Bind(3, c.op)
             .Bind(4, c.bw.count)
             .Bind(5, c.bw.bus_bytes)
             .Bind(6, c.bw.seconds)
             .Bind(7, c.bw.BusBw())
             .Run();
  }
  return st;
}

// A diagnosis reported again is active: its resolution, if any, goes.
absl::Status WriteRow(sqlite3* db, const Diagnosis& g) {
  Stmt s(db,
         "INSERT INTO diagnoses VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) "
         "ON CONFLICT(job,kind,subject) DO UPDATE SET team=?4, severity=?5, ranks=?6, "
         "hosts=?7, evidence=?8, first_seen_ns=MIN(first_seen_ns,?9), last_seen_ns=?10;");
  absl::Status st = s.Bind(1, g.job)
                        .Bind(2, g.kind)
                        .Bind(3, g.subject)
                        .Bind(4, TeamName(g.team))
                        .Bind(5, SeverityName(g.severity))
                        .Bind(6, absl::StrJoin(g.ranks, ","))
                        .Bind(7, absl::StrJoin(g.hosts, ","))
                        .Bind(8, g.evidence)
                        .Bind(9, g.first_seen_ns)
                        .Bind(10, g.last_seen_ns)
                        .Run();
  if (!st.ok()) return st;
  Stmt del(db, "DELETE FROM diagnosis_resolutions WHERE job=?1 AND kind=?2 AND subject=?3;");
  return del.Bind(1, g.job).Bind(2, g.kind).Bind(3, g.subject).Run();
}

absl::Status WriteRow(sqlite3* db, const DiagnosisResolution& res) {
  Stmt s(db, "INSERT OR REPLACE INTO diagnosis_resolutions VALUES (?1,?2,?3,?4);");
  return s.Bind(1, res.job).Bind(2, res.kind).Bind(3, res.subject).Bind(4, res.resolved_ns).Run();
}

absl::Status WriteRow(sqlite3* db, const history::CalibrationRows& c) {
  return history::WriteCalibration(db, c);
}

absl::Status WriteCheckpoint(sqlite3* db, const RankCheckpoint& c) {
  Stmt s(db,
         "INSERT INTO ranks (job, key, rank, host, pid, local_rank, liveness, records, dropped, "
         "last_record_ns, last_seen_ns, next_position, start_ticks, uid, undefined_signature) "
         "VALUES (?1,?2,?3,?4,?5,?6,'alive',?7,0,0,0,?8,?9,?10,?11) "
         "ON CONFLICT(job, key) DO UPDATE SET rank=?3, host=?4, pid=?5, local_rank=?6, "
         "records=?7, next_position=?8, start_ticks=?9, uid=?10, undefined_signature=?11;");
  return s.Bind(1, c.job)
      .Bind(2, c.key)
      .Bind(3, c.rank)
      .Bind(4, c.host)
      .Bind(5, c.pid)
      .Bind(6, c.local_rank)
      .Bind(7, c.records)
      .Bind(8, c.next_position)
      .Bind(9, c.start_ticks)
      .Bind(10, c.uid)
      .Bind(11, c.undefined_signature)
      .Run();
}

}  // namespace

absl::Status Store::Write(const std::vector<Op>& ops, const Checkpoints& checkpoints) {
  sqlite3* db = write_db_;
  if (auto st = Exec(db, "BEGIN;"); !st.ok()) return st;
  absl::Status st;
  for (const auto& [key, row] : checkpoints) {
    st = WriteCheckpoint(db, row);
    if (!st.ok()) break;
  }
  for (const Op& op : ops) {
    if (!st.ok()) break;
    st = std::visit(
        [db](const auto& row) -> absl::Status {
          if constexpr (std::is_same_v<std::decay_t<decltype(row)>, RunBaselineUpdate>) {
            return history::WriteRunBaseline(db, row.run, row.keep_runs);
          } else {
            return WriteRow(db, row);
          }
        },
        op);
    if (!st.ok()) break;
  }
  if (!st.ok()) {
    Exec(db, "ROLLBACK;").IgnoreError();
    return st;
  }
  return Exec(db, "COMMIT;");
}

absl::StatusOr<std::vector<JobSummary>> Store::LoadJobs() {
  std::lock_guard<std::mutex> l(read_mu_);
  Stmt q(read_db_,
         "SELECT job, job_name, first_seen_ns, last_seen_ns, ranks, records, state, uid, "
         "dropped FROM jobs ORDER BY first_seen_ns;");
  if (!q.ok()) return SqlError(read_db_, "load jobs");
  std::vector<JobSummary> out;
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    JobSummary j;
    j.job = q.Text(0);
    j.job_name = q.Text(1);
    j.first_seen_ns = q.Int(2);
    j.last_seen_ns = q.Int(3);
    j.ranks = static_cast<uint32_t>(q.Int(4));
    j.records = q.Int(5);
    j.state = q.Text(6);
    j.owner_uid = q.Int(7);
    j.dropped = q.Int(8);
    out.push_back(std::move(j));
  }
  return out;
}

absl::StatusOr<JobSeed> Store::LoadJobSeed(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  JobSeed seed;
  {
    Stmt q(read_db_, "SELECT uid FROM jobs WHERE job=?1;");
    if (!q.ok()) return SqlError(read_db_, "load job owner");
    q.Bind(1, job);
    XPU_ASSIGN_OR_RETURN(const bool row, q.Step());
    if (row) seed.owner_uid = q.Int(0);
  }
  Stmt q(read_db_,
         "SELECT key, pid, host, start_ticks, records, next_position, undefined_signature, uid "
         "FROM ranks WHERE job=?1;");
  if (!q.ok()) return SqlError(read_db_, "load rank checkpoints");
  q.Bind(1, job);
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    RankSeed r;
    r.pid = static_cast<int32_t>(q.Int(1));
    r.host = q.Text(2);
    r.start_ticks = q.Int(3);
    r.records = q.Int(4);
    r.next_position = q.Int(5);
    r.undefined_signature = q.Int(6);
    if (seed.owner_uid < 0) seed.owner_uid = q.Int(7);
    seed.ranks.emplace(q.Text(0), std::move(r));
  }
  return seed;
}

absl::StatusOr<std::vector<RankRow>> Store::LoadRanks(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  Stmt q(read_db_,
         "SELECT key, rank, host, pid, local_rank, liveness, records, dropped, last_record_ns, "
         "last_seen_ns FROM ranks WHERE job=?1 ORDER BY rank, key;");
  if (!q.ok()) return SqlError(read_db_, "load ranks");
  q.Bind(1, job);
  std::vector<RankRow> out;
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    RankRow r;
    r.job = job;
    r.key = q.Text(0);
    r.rank = static_cast<int32_t>(q.Int(1));
    r.host = q.Text(2);
    r.pid = static_cast<int32_t>(q.Int(3));
    r.local_rank = static_cast<int32_t>(q.Int(4));
    r.liveness = q.Text(5);
    r.records = q.Int(6);
    r.dropped = q.Int(7);
    r.last_record_ns = q.Int(8);
    r.last_seen_ns = q.Int(9);
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<Diagnosis>> Store::LoadDiagnoses(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  Stmt q(read_db_,
         "SELECT kind, subject, team, severity, ranks, hosts, evidence, first_seen_ns, "
         "last_seen_ns FROM diagnoses WHERE job=?1 ORDER BY first_seen_ns;");
  if (!q.ok()) return SqlError(read_db_, "load diagnoses");
  q.Bind(1, job);
  std::vector<Diagnosis> out;
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    Diagnosis d;
    d.job = job;
    d.kind = q.Text(0);
    d.subject = q.Text(1);
    std::string team = q.Text(2), sev = q.Text(3);
    d.team = team == "infrastructure" ? Team::kInfrastructure
             : team == "algorithm"    ? Team::kAlgorithm
             : team == "triage"       ? Team::kTriage
                                      : Team::kOperations;
    d.severity = sev == "critical" ? Severity::kCritical
                 : sev == "info"   ? Severity::kInfo
                                   : Severity::kWarning;
    for (absl::string_view r : absl::StrSplit(q.Text(4), ',', absl::SkipEmpty())) {
      int32_t v;
      if (absl::SimpleAtoi(r, &v)) d.ranks.push_back(v);
    }
    d.hosts = absl::StrSplit(q.Text(5), ',', absl::SkipEmpty());
    d.evidence = q.Text(6);
    d.first_seen_ns = q.Int(7);
    d.last_seen_ns = q.Int(8);
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::vector<DiagnosisResolution>> Store::LoadDiagnosisResolutions(
    const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  Stmt q(read_db_, "SELECT kind, subject, resolved_ns FROM diagnosis_resolutions WHERE job=?1;");
  if (!q.ok()) return SqlError(read_db_, "load diagnosis resolutions");
  q.Bind(1, job);
  std::vector<DiagnosisResolution> out;
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    out.push_back(DiagnosisResolution{job, q.Text(0), q.Text(1), static_cast<uint64_t>(q.Int(2))});
  }
  return out;
}

absl::StatusOr<std::vector<WindowSummaryRow>> Store::LoadWindows(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  std::vector<WindowSummaryRow> out;
  {
    Stmt q(
        read_db_,
        "SELECT window_start_ns, window_end_ns, records, kernels, gemms, collectives, memcpys, "
        "syncs, host_events, other FROM window_summaries WHERE job=?1 ORDER BY window_start_ns;");
    if (!q.ok()) return SqlError(read_db_, "load windows");
    q.Bind(1, job);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
      if (!more) break;
      WindowSummaryRow w;
      w.job = job;
      w.window_start_ns = q.Int(0);
      w.window_end_ns = q.Int(1);
      w.records = q.Int(2);
      w.kinds.kernel = q.Int(3);
      w.kinds.gemm = q.Int(4);
      w.kinds.collective = q.Int(5);
      w.kinds.memcpy = q.Int(6);
      w.kinds.sync = q.Int(7);
      w.kinds.host = q.Int(8);
      w.kinds.other = q.Int(9);
      out.push_back(std::move(w));
    }
  }
  for (WindowSummaryRow& w : out) {
    Stmt g(read_db_,
           "SELECT signature, count, total_ns, flops FROM window_gemm WHERE job=?1 AND "
           "window_start_ns=?2 ORDER BY signature;");
    g.Bind(1, job).Bind(2, w.window_start_ns);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, g.Step());
      if (!more) break;
      w.gemm.push_back(GemmWindowRow{g.Text(0), static_cast<uint64_t>(g.Int(1)),
                                     static_cast<uint64_t>(g.Int(2)), g.Real(3)});
    }
    Stmt c(read_db_,
           "SELECT op, count, bus_bytes, seconds FROM window_collective WHERE job=?1 AND "
           "window_start_ns=?2 ORDER BY op;");
    c.Bind(1, job).Bind(2, w.window_start_ns);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, c.Step());
      if (!more) break;
      CollectiveWindowRow cw;
      cw.op = c.Text(0);
      cw.bw.count = c.Int(1);
      cw.bw.bus_bytes = c.Real(2);
      cw.bw.seconds = c.Real(3);
      w.collectives.push_back(cw);
    }
  }
  return out;
}

absl::StatusOr<std::vector<history::RunBaseline>> Store::LoadRunBaselines(
    const std::string& job_name, const std::string& gpu_model, bool any_model,
    const std::string& exclude_job, int limit) {
  std::lock_guard<std::mutex> l(read_mu_);
  return history::ReadRunBaselines(read_db_, job_name, gpu_model, any_model, exclude_job, limit);
}

absl::StatusOr<history::CalibrationRows> Store::LoadCalibration(const std::string& gpu_model) {
  std::lock_guard<std::mutex> l(read_mu_);
  return history::ReadCalibration(read_db_, gpu_model);
}

}  // namespace xpu::engine::history
