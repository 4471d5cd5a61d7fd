#include "engine/history/store.h"

#include <fcntl.h>
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

namespace xpu::engine::history {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("store");
  return log;
}

logging::RateLimiter g_write_log(1, 10 * 1000000000ull);

// Retries of a transaction that failed for a reason of the connection.
constexpr auto kRetryFirst = std::chrono::milliseconds(500);
constexpr auto kRetryMax = std::chrono::seconds(10);

// The SQL of each row kind; one text for both backends.

absl::Status WriteRow(SqlConnection& db, const JobSummary& j) {
  return db.Run(
      "INSERT INTO jobs (job, job_name, first_seen_ns, last_seen_ns, ranks, records, state, "
      "uid, dropped) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (job) DO UPDATE SET "
      "job_name=excluded.job_name, first_seen_ns=CASE WHEN jobs.first_seen_ns < "
      "excluded.first_seen_ns THEN jobs.first_seen_ns ELSE excluded.first_seen_ns END, "
      "last_seen_ns=excluded.last_seen_ns, ranks=excluded.ranks, records=excluded.records, "
      "state=excluded.state, uid=CASE WHEN excluded.uid >= 0 THEN excluded.uid ELSE jobs.uid "
      "END, dropped=excluded.dropped;",
      Params(j.job, j.job_name, j.first_seen_ns, j.last_seen_ns, j.ranks, j.records, j.state,
             j.owner_uid, j.dropped));
}

// The record count of an existing rank belongs to its checkpoints (exact
// across restarts): the window's row updates everything else.
absl::Status WriteRow(SqlConnection& db, const RankRow& r) {
  return db.Run(
      "INSERT INTO ranks (job, key, rank, host, pid, local_rank, liveness, records, dropped, "
      "last_record_ns, last_seen_ns) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT "
      "(job, key) DO UPDATE SET rank=excluded.rank, host=excluded.host, pid=excluded.pid, "
      "local_rank=excluded.local_rank, liveness=excluded.liveness, dropped=excluded.dropped, "
      "last_record_ns=excluded.last_record_ns, last_seen_ns=excluded.last_seen_ns;",
      Params(r.job, r.key, r.rank, r.host, r.pid, r.local_rank, r.liveness, r.records, r.dropped,
             r.last_record_ns, r.last_seen_ns));
}

absl::Status WriteRow(SqlConnection& db, const DaemonState& d) {
  return db.Run(
      "INSERT INTO daemons VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT (daemon_id) DO UPDATE "
      "SET host=excluded.host, version=excluded.version, first_seen_ns=excluded.first_seen_ns, "
      "last_seen_ns=excluded.last_seen_ns, batches=excluded.batches, records=excluded.records, "
      "records_dropped=excluded.records_dropped;",
      Params(d.daemon_id, d.host, d.version, d.first_seen_ns, d.last_seen_ns, d.batches,
             d.records, d.records_dropped));
}

// The window's summary, then its GEMM and collective rows.
absl::Status WriteRow(SqlConnection& db, const WindowSummaryRow& w) {
  XPU_RETURN_IF_ERROR(db.Run(
      "INSERT INTO window_summaries VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT "
      "(job, window_start_ns) DO UPDATE SET window_end_ns=excluded.window_end_ns, "
      "records=excluded.records, kernels=excluded.kernels, gemms=excluded.gemms, "
      "collectives=excluded.collectives, memcpys=excluded.memcpys, syncs=excluded.syncs, "
      "host_events=excluded.host_events, other=excluded.other;",
      Params(w.job, w.window_start_ns, w.window_end_ns, w.records, w.kinds.kernel, w.kinds.gemm,
             w.kinds.collective, w.kinds.memcpy, w.kinds.sync, w.kinds.host, w.kinds.other)));
  for (const GemmWindowRow& g : w.gemm) {
    XPU_RETURN_IF_ERROR(db.Run(
        "INSERT INTO window_gemm VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (job, "
        "window_start_ns, signature) DO UPDATE SET count=excluded.count, "
        "total_ns=excluded.total_ns, flops=excluded.flops, tflops=excluded.tflops;",
        Params(w.job, w.window_start_ns, g.signature, g.count, g.total_ns, g.flops, g.Tflops())));
  }
  for (const CollectiveWindowRow& c : w.collectives) {
    XPU_RETURN_IF_ERROR(db.Run(
        "INSERT INTO window_collective VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (job, "
        "window_start_ns, op) DO UPDATE SET count=excluded.count, bus_bytes=excluded.bus_bytes, "
        "seconds=excluded.seconds, busbw_bytes_per_second=excluded.busbw_bytes_per_second;",
        Params(w.job, w.window_start_ns, c.op, c.bw.count, c.bw.bus_bytes, c.bw.seconds,
               c.bw.BusBw())));
  }
  return absl::OkStatus();
}

// A diagnosis reported again is active: its resolution, if any, goes.
absl::Status WriteRow(SqlConnection& db, const Diagnosis& g) {
  XPU_RETURN_IF_ERROR(db.Run(
      "INSERT INTO diagnoses VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (job, kind, "
      "subject) DO UPDATE SET team=excluded.team, severity=excluded.severity, "
      "ranks=excluded.ranks, hosts=excluded.hosts, evidence=excluded.evidence, "
      "first_seen_ns=CASE WHEN diagnoses.first_seen_ns < excluded.first_seen_ns THEN "
      "diagnoses.first_seen_ns ELSE excluded.first_seen_ns END, "
      "last_seen_ns=excluded.last_seen_ns;",
      Params(g.job, g.kind, g.subject, TeamName(g.team), SeverityName(g.severity),
             absl::StrJoin(g.ranks, ","), absl::StrJoin(g.hosts, ","), g.evidence,
             g.first_seen_ns, g.last_seen_ns)));
  return db.Run("DELETE FROM diagnosis_resolutions WHERE job=$1 AND kind=$2 AND subject=$3;",
                Params(g.job, g.kind, g.subject));
}

absl::Status WriteRow(SqlConnection& db, const DiagnosisResolution& r) {
  return db.Run(
      "INSERT INTO diagnosis_resolutions VALUES ($1,$2,$3,$4) ON CONFLICT (job, kind, subject) "
      "DO UPDATE SET resolved_ns=excluded.resolved_ns;",
      Params(r.job, r.kind, r.subject, r.resolved_ns));
}

absl::Status WriteRow(SqlConnection& db, const history::CalibrationRows& c) {
  return history::WriteCalibration(db, c);
}

absl::Status WriteCheckpoint(SqlConnection& db, const RankCheckpoint& c) {
  return db.Run(
      "INSERT INTO ranks (job, key, rank, host, pid, local_rank, liveness, records, dropped, "
      "last_record_ns, last_seen_ns, next_position, start_ticks, uid, undefined_signature) "
      "VALUES ($1,$2,$3,$4,$5,$6,'alive',$7,0,0,0,$8,$9,$10,$11) ON CONFLICT (job, key) DO "
      "UPDATE SET rank=excluded.rank, host=excluded.host, pid=excluded.pid, "
      "local_rank=excluded.local_rank, records=excluded.records, "
      "next_position=excluded.next_position, start_ticks=excluded.start_ticks, "
      "uid=excluded.uid, undefined_signature=excluded.undefined_signature;",
      Params(c.job, c.key, c.rank, c.host, c.pid, c.local_rank, c.records, c.next_position,
             c.start_ticks, c.uid, c.undefined_signature));
}

absl::Status WriteRow(SqlConnection& db, const AlertDelivery& a) {
  return db.Run(
      "INSERT INTO alert_deliveries VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT (job, kind, subject, "
      "first_seen_ns, status) DO NOTHING;",
      Params(a.job, a.kind, a.subject, a.first_seen_ns, a.status, a.delivered_ns));
}

Diagnosis DiagnosisFromRow(const std::string& job, const SqlResult& q, size_t i) {
  Diagnosis d;
  d.job = job;
  d.kind = q.Text(i, 0);
  d.subject = q.Text(i, 1);
  const std::string team = q.Text(i, 2), sev = q.Text(i, 3);
  d.team = team == "infrastructure" ? Team::kInfrastructure
           : team == "algorithm"    ? Team::kAlgorithm
           : team == "triage"       ? Team::kTriage
                                    : Team::kOperations;
  d.severity = sev == "critical" ? Severity::kCritical
               : sev == "info"   ? Severity::kInfo
                                 : Severity::kWarning;
  for (absl::string_view r : absl::StrSplit(q.Text(i, 4), ',', absl::SkipEmpty())) {
    int32_t v;
    if (absl::SimpleAtoi(r, &v)) d.ranks.push_back(v);
  }
  d.hosts = absl::StrSplit(q.Text(i, 5), ',', absl::SkipEmpty());
  d.evidence = q.Text(i, 6);
  d.first_seen_ns = static_cast<uint64_t>(q.Int(i, 7));
  d.last_seen_ns = static_cast<uint64_t>(q.Int(i, 8));
  return d;
}

JobSummary JobFromRow(const SqlResult& q, size_t i) {
  JobSummary j;
  j.job = q.Text(i, 0);
  j.job_name = q.Text(i, 1);
  j.first_seen_ns = static_cast<uint64_t>(q.Int(i, 2));
  j.last_seen_ns = static_cast<uint64_t>(q.Int(i, 3));
  j.ranks = static_cast<uint32_t>(q.Int(i, 4));
  j.records = static_cast<uint64_t>(q.Int(i, 5));
  j.state = q.Text(i, 6);
  j.owner_uid = q.Int(i, 7);
  j.dropped = static_cast<uint64_t>(q.Int(i, 8));
  return j;
}

constexpr char kJobColumns[] =
    "SELECT job, job_name, first_seen_ns, last_seen_ns, ranks, records, state, uid, dropped "
    "FROM jobs";

// Creates the SQLite file with `mode` (never through a symlink) and brings
// an existing one, and its WAL files, to it: history holds every job's
// names, hosts and diagnoses. SQLite gives the -wal and -shm files it
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

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& db,
                                                   const StoreOptions& options) {
  std::unique_ptr<Store> s(new Store());
  s->options_ = options;
  const bool sqlite = !IsPostgresUrl(db);
  if (sqlite) XPU_RETURN_IF_ERROR(PrepareFiles(db, options));
  XPU_ASSIGN_OR_RETURN(s->write_db_, OpenSqlConnection(db));
  if (sqlite && options.max_db_bytes > 0) {
    XPU_RETURN_IF_ERROR(s->write_db_->Exec(absl::StrCat(
        "PRAGMA max_page_count=", std::max<uint64_t>(16, options.max_db_bytes / 4096), ";")));
  }
  XPU_RETURN_IF_ERROR(Migrate(*s->write_db_));
  XPU_ASSIGN_OR_RETURN(s->read_db_, OpenSqlConnection(db));
  s->dialect_ = s->write_db_->dialect();
  s->description_ = s->write_db_->Describe();
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
}

absl::StatusOr<int> Store::SchemaVersion() {
  std::lock_guard<std::mutex> l(read_mu_);
  return ReadSchemaVersion(*read_db_);
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
    std::set<std::string> jobs;
    for (RankCheckpoint& r : rows) {
      jobs.insert(r.job);
      auto key = std::make_pair(r.job, r.key);
      checkpoints_[key] = std::move(r);
    }
    if (on_durable) {
      // The newest callback stands for the older ones, and waits for
      // their checkpoints too.
      Ack& a = acks_[ack_key];
      a.fn = std::move(on_durable);
      a.jobs.insert(jobs.begin(), jobs.end());
    }
  }
  cv_.notify_one();
}
void Store::EnqueueAlertDelivery(const AlertDelivery& d) { Enqueue(d); }
void Store::EnqueueRelease(const std::string& job, const std::string& owner) {
  Enqueue(Release{job, owner});
}
void Store::EnqueueBarrier(std::function<void(const BarrierResult&)> done) {
  Enqueue(Barrier{std::move(done)});
}

void Store::SetFencingOwner(const std::string& replica) {
  std::lock_guard<std::mutex> l(mu_);
  fencing_owner_ = replica;
}

StoreStatus Store::Status() const {
  std::lock_guard<std::mutex> l(mu_);
  StoreStatus st;
  st.degraded = stats_.degraded;
  if (st.degraded) st.error = stats_.last_error;
  st.degraded_since_ns = stats_.degraded ? degraded_since_ns_ : 0;
  st.write_failures = stats_.failures;
  st.rows_pending = queue_.size() + retry_.size() + checkpoints_.size();
  st.rows_dropped = stats_.rows_dropped;
  return st;
}

WriteStats Store::write_stats() const {
  std::lock_guard<std::mutex> l(mu_);
  WriteStats s = stats_;
  s.rows_pending_retry = retry_.size();
  return s;
}

absl::Status Store::Flush() {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = enqueued_;
  cv_.notify_one();
  done_cv_.wait(l, [&] { return processed_ >= target || stop_; });
  absl::Status st = error_;
  error_ = absl::OkStatus();
  return st;
}

bool Store::FlushFor(std::chrono::milliseconds max_wait, uint64_t small_backlog) {
  std::unique_lock<std::mutex> l(mu_);
  const uint64_t target = enqueued_;
  cv_.notify_one();
  auto done = [&] { return processed_ >= target || stop_; };
  if (target - std::min(target, processed_) <= small_backlog) {
    done_cv_.wait(l, done);
    return true;
  }
  return done_cv_.wait_for(l, max_wait, done);
}

void Store::WriterLoop() {
  auto backoff = std::chrono::steady_clock::duration(kRetryFirst);
  auto next_retry = std::chrono::steady_clock::time_point::min();
  bool failing = false;  // the last attempt failed for a reason of the connection
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    // At stop, rows waiting for a retry get one last attempt.
    const bool retry_due = !failing || stop_ || std::chrono::steady_clock::now() >= next_retry;
    if (!retry_due && !queue_.empty()) {
      // The database is away: new rows wait behind the old ones, in order;
      // whoever flushes or waits on a barrier hears so now.
      std::vector<Op> parked;
      parked.swap(queue_);
      processed_ += parked.size();
      std::vector<std::function<void()>> calls;
      FinishBarriers(parked, absl::UnavailableError(stats_.last_error), &calls);
      RetainLocked(&parked);
      if (error_.ok()) error_ = absl::UnavailableError(stats_.last_error);
      done_cv_.notify_all();
      l.unlock();
      for (auto& c : calls) c();
      l.lock();
      continue;
    }
    const bool work =
        !queue_.empty() || !retry_.empty() || !checkpoints_.empty() || !acks_.empty();
    if (!work) {
      if (stop_) break;
      cv_.wait(l);
      continue;
    }
    if (!retry_due) {
      cv_.wait_until(l, next_retry);
      continue;
    }
    std::vector<Op> ops;
    ops.swap(retry_);
    const uint64_t fresh = queue_.size();
    for (Op& op : queue_) ops.push_back(std::move(op));
    queue_.clear();
    Checkpoints checkpoints;
    checkpoints.swap(checkpoints_);
    Acks acks;
    acks.swap(acks_);
    l.unlock();
    // Diagnoses (and their resolutions) first, in a transaction of their
    // own: at 100k ranks a window's rank rows and checkpoints make a
    // transaction of seconds, and what `xpu diagnose` asks for must not
    // wait behind it.
    // (Not across a lease release or a barrier: their order with the rows
    // before them is what replicas and flushes rely on.)
    const bool ordered = std::any_of(ops.begin(), ops.end(), [](const Op& op) {
      return std::holds_alternative<Release>(op) || std::holds_alternative<Barrier>(op);
    });
    std::vector<Op> urgent, rest;
    for (Op& op : ops) {
      const bool first = !ordered && (std::holds_alternative<Diagnosis>(op) ||
                                      std::holds_alternative<DiagnosisResolution>(op));
      (first ? urgent : rest).push_back(std::move(op));
    }
    bool transient = false;
    if (!urgent.empty() && (!rest.empty() || !checkpoints.empty())) {
      transient = WriteBatch(std::move(urgent), {}, {});
    } else {
      for (Op& op : urgent) rest.push_back(std::move(op));
    }
    transient = WriteBatch(std::move(rest), std::move(checkpoints), std::move(acks)) || transient;
    l.lock();
    processed_ += fresh;
    if (!transient) {
      if (failing) Log()->info("writes to {} succeed again", description_);
      failing = false;
      backoff = kRetryFirst;
      stats_.degraded = false;
    } else {
      failing = true;
      next_retry = std::chrono::steady_clock::now() + backoff;
      backoff = std::min<std::chrono::steady_clock::duration>(backoff * 2, kRetryMax);
      if (!stats_.degraded) degraded_since_ns_ = RealtimeNs();
      stats_.degraded = true;
      if (stop_) {
        // Shutting down with the database away: what could not be written
        // is lost, and counted.
        const size_t lost = retry_.size() + checkpoints_.size();
        stats_.rows_dropped += lost;
        Log()->error("stopping with {} rows not written: {}", lost, stats_.last_error);
        retry_.clear();
        checkpoints_.clear();
        acks_.clear();
        break;
      }
    }
    done_cv_.notify_all();
  }
  done_cv_.notify_all();
}

void Store::FinishBarriers(std::vector<Op>& ops, const absl::Status& st,
                           std::vector<std::function<void()>>* calls) {
  std::vector<Op> rest;
  for (Op& op : ops) {
    if (Barrier* b = std::get_if<Barrier>(&op)) {
      BarrierResult r;
      r.status = st;
      r.fenced_jobs.swap(fenced_jobs_);
      if (b->done) calls->push_back([done = std::move(b->done), r] { done(r); });
    } else {
      rest.push_back(std::move(op));
    }
  }
  ops.swap(rest);
}

void Store::RetainLocked(std::vector<Op>* ops) {
  for (Op& op : *ops) retry_.push_back(std::move(op));
  ops->clear();
  const size_t bound = options_.max_pending_rows;
  if (retry_.size() > bound) {
    // The oldest rows go first; they are counted, never silently lost.
    const size_t drop = retry_.size() - bound;
    stats_.rows_dropped += drop;
    retry_.erase(retry_.begin(), retry_.begin() + static_cast<std::ptrdiff_t>(drop));
    if (g_write_log.Allow()) {
      Log()->error("{} rows dropped, the retry buffer ({} rows) is full", drop, bound);
    }
  }
}

void Store::NoteFailureLocked(const absl::Status& st) {
  stats_.failures++;
  stats_.last_error = std::string(st.message());
  if (error_.ok()) error_ = st;
}

void Store::RequeueCheckpointsLocked(Checkpoints* checkpoints, Acks* acks) {
  // Newer checkpoints and acknowledgements queued meanwhile win.
  for (auto& [key, row] : *checkpoints) checkpoints_.emplace(key, std::move(row));
  for (auto& [key, ack] : *acks) {
    auto [it, fresh] = acks_.emplace(key, Ack{});
    if (fresh) it->second.fn = std::move(ack.fn);
    it->second.jobs.insert(ack.jobs.begin(), ack.jobs.end());
  }
}

void Store::AcksDurable(Acks* acks, const std::set<std::string>& not_written,
                        std::vector<std::function<void()>>* calls) {
  for (auto& [key, ack] : *acks) {
    const bool all = std::none_of(ack.jobs.begin(), ack.jobs.end(),
                                  [&](const std::string& j) { return not_written.count(j) > 0; });
    // Withheld: the sender keeps what the acknowledgement would release.
    if (all && ack.fn) calls->push_back(std::move(ack.fn));
  }
}

bool Store::WriteBatch(std::vector<Op> ops, Checkpoints checkpoints, Acks acks) {
  std::vector<std::function<void()>> calls;  // barrier and ack callbacks, run without mu_
  Attempt a = Write(ops, checkpoints);
  bool transient = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (a.status.ok()) {
      stats_.transactions++;
      stats_.rows_written += a.rows;
      stats_.rows_fenced += a.fenced_rows;
      fenced_jobs_.insert(a.fenced_jobs.begin(), a.fenced_jobs.end());
      AcksDurable(&acks, a.fenced_jobs, &calls);
      FinishBarriers(ops, absl::OkStatus(), &calls);
    } else {
      NoteFailureLocked(a.status);
      if (g_write_log.Allow()) {
        Log()->error("write to {} failed ({} rows{}): {}", description_,
                     ops.size() + checkpoints.size(),
                     a.transient ? ", kept for a retry" : ", retried one by one",
                     std::string(a.status.message()));
      }
      if (a.transient) {
        transient = true;
        RequeueCheckpointsLocked(&checkpoints, &acks);
        FinishBarriers(ops, a.status, &calls);
        RetainLocked(&ops);
      }
    }
  }
  if (!a.status.ok() && !a.transient) {
    // A row the database refuses: the checkpoints first, then the other
    // rows one by one; only the rows that fail are dropped.
    transient = WriteCheckpoints(std::move(checkpoints), std::move(acks), &calls);
    if (transient) {
      std::lock_guard<std::mutex> l(mu_);
      FinishBarriers(ops, absl::UnavailableError(stats_.last_error), &calls);
      RetainLocked(&ops);
    } else {
      transient = WriteOneByOne(std::move(ops), &calls);
    }
  }
  for (auto& c : calls) c();
  return transient;
}

bool Store::WriteCheckpoints(Checkpoints checkpoints, Acks acks,
                             std::vector<std::function<void()>>* calls) {
  if (checkpoints.empty() && acks.empty()) return false;
  Attempt a = Write({}, checkpoints);
  std::unique_lock<std::mutex> l(mu_);
  std::set<std::string> not_written = a.fenced_jobs;
  if (a.status.ok()) {
    stats_.transactions++;
    stats_.rows_written += a.rows;
    stats_.rows_fenced += a.fenced_rows;
    fenced_jobs_.insert(a.fenced_jobs.begin(), a.fenced_jobs.end());
    AcksDurable(&acks, not_written, calls);
    return false;
  }
  NoteFailureLocked(a.status);
  if (a.transient) {
    RequeueCheckpointsLocked(&checkpoints, &acks);
    return true;
  }
  not_written.clear();
  for (auto it = checkpoints.begin(); it != checkpoints.end();) {
    Checkpoints one;
    one.insert(*it);
    l.unlock();
    Attempt r = Write({}, one);
    l.lock();
    if (r.status.ok()) {
      stats_.transactions++;
      stats_.rows_written += r.rows;
      stats_.rows_fenced += r.fenced_rows;
      fenced_jobs_.insert(r.fenced_jobs.begin(), r.fenced_jobs.end());
      not_written.insert(r.fenced_jobs.begin(), r.fenced_jobs.end());
    } else if (r.transient) {
      NoteFailureLocked(r.status);
      Checkpoints rest(it, checkpoints.end());
      RequeueCheckpointsLocked(&rest, &acks);
      return true;
    } else {
      NoteFailureLocked(r.status);
      stats_.rows_dropped++;
      not_written.insert(it->second.job);
    }
    it = checkpoints.erase(it);
  }
  AcksDurable(&acks, not_written, calls);
  return false;
}

bool Store::WriteOneByOne(std::vector<Op> ops, std::vector<std::function<void()>>* calls) {
  std::vector<Op> kept;
  absl::Status barrier_status;
  bool transient = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (std::holds_alternative<Barrier>(ops[i])) {
      kept.push_back(std::move(ops[i]));
      continue;
    }
    Attempt one = Write({ops[i]}, {});
    std::lock_guard<std::mutex> g(mu_);
    if (one.status.ok()) {
      stats_.transactions++;
      stats_.rows_written += one.rows;
      stats_.rows_fenced += one.fenced_rows;
      fenced_jobs_.insert(one.fenced_jobs.begin(), one.fenced_jobs.end());
    } else if (one.transient) {
      NoteFailureLocked(one.status);
      barrier_status = one.status;
      transient = true;
      std::vector<Op> rest;
      for (size_t j = i; j < ops.size(); ++j) {
        if (std::holds_alternative<Barrier>(ops[j])) {
          kept.push_back(std::move(ops[j]));
        } else {
          rest.push_back(std::move(ops[j]));
        }
      }
      RetainLocked(&rest);
      break;
    } else {
      NoteFailureLocked(one.status);
      stats_.rows_dropped++;
      if (g_write_log.Allow()) {
        Log()->error("dropping a row {} refuses: {}", description_,
                     std::string(one.status.message()));
      }
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  FinishBarriers(kept, barrier_status, calls);
  return transient;
}

absl::Status Store::WriteOp(const Op& op) {
  SqlConnection& db = *write_db_;
  return std::visit(
      [&db](const auto& row) -> absl::Status {
        using T = std::decay_t<decltype(row)>;
        if constexpr (std::is_same_v<T, RunBaselineUpdate>) {
          return history::WriteRunBaseline(db, row.run, row.keep_runs);
        } else if constexpr (std::is_same_v<T, Release>) {
          return db.Run("DELETE FROM job_owners WHERE job=$1 AND owner=$2;",
                        Params(row.job, row.owner));
        } else if constexpr (std::is_same_v<T, Barrier>) {
          return absl::OkStatus();
        } else {
          return WriteRow(db, row);
        }
      },
      op);
}

namespace {

// The job a row belongs to, for fencing ("" = not a job's row).
struct JobOfRow {
  std::string operator()(const JobSummary& j) const { return j.job; }
  std::string operator()(const RankRow& r) const { return r.job; }
  std::string operator()(const WindowSummaryRow& w) const { return w.job; }
  std::string operator()(const Diagnosis& d) const { return d.job; }
  std::string operator()(const DiagnosisResolution& r) const { return r.job; }
  std::string operator()(const AlertDelivery& a) const { return a.job; }
  template <typename T>
  std::string operator()(const T&) const {
    return "";
  }
};

}  // namespace

Store::Attempt Store::Write(const std::vector<Op>& ops, const Checkpoints& checkpoints) {
  Attempt a;
  SqlConnection& db = *write_db_;
  std::string owner;
  {
    std::lock_guard<std::mutex> l(mu_);
    owner = fencing_owner_;
  }
  auto fail = [&](absl::Status st) {
    a.transient = db.LastErrorTransient();
    a.status = std::move(st);
    db.Exec("ROLLBACK;").IgnoreError();
    a.rows = 0;
    a.fenced_jobs.clear();
    a.fenced_rows = 0;
    return a;
  };
  if (absl::Status st = db.Begin(); !st.ok()) return fail(st);
  std::set<std::string> owned;
  if (!owner.empty()) {
    absl::StatusOr<SqlResult> r =
        db.Query(absl::StrCat("SELECT job FROM job_owners WHERE owner=$1", db.ForShare(), ";"),
                 Params(owner));
    if (!r.ok()) return fail(r.status());
    for (size_t i = 0; i < r->rows(); ++i) owned.insert(r->Text(i, 0));
  }
  for (const auto& [key, row] : checkpoints) {
    if (!owner.empty() && !owned.count(row.job)) {
      a.fenced_jobs.insert(row.job);
      a.fenced_rows++;
      continue;
    }
    if (absl::Status st = WriteCheckpoint(db, row); !st.ok()) return fail(st);
    a.rows++;
  }
  for (const Op& op : ops) {
    if (std::holds_alternative<Barrier>(op)) continue;
    if (!owner.empty()) {
      if (const RunBaselineUpdate* u = std::get_if<RunBaselineUpdate>(&op)) {
        if (!owned.count(u->run.job)) {
          a.fenced_jobs.insert(u->run.job);
          a.fenced_rows++;
          continue;
        }
      } else if (std::string job = std::visit(JobOfRow{}, op); !job.empty() && !owned.count(job)) {
        a.fenced_jobs.insert(job);
        a.fenced_rows++;
        continue;
      }
    }
    if (absl::Status st = WriteOp(op); !st.ok()) return fail(st);
    a.rows++;
  }
  if (absl::Status st = db.Exec("COMMIT;"); !st.ok()) return fail(st);
  return a;
}

absl::StatusOr<std::vector<JobSummary>> Store::LoadJobs() {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(SqlResult q,
                       read_db_->Query(absl::StrCat(kJobColumns, " ORDER BY first_seen_ns;"), {}));
  std::vector<JobSummary> out;
  for (size_t i = 0; i < q.rows(); ++i) out.push_back(JobFromRow(q, i));
  return out;
}

absl::StatusOr<std::optional<JobSummary>> Store::LoadJob(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(SqlResult q,
                       read_db_->Query(absl::StrCat(kJobColumns, " WHERE job=$1;"), Params(job)));
  if (q.empty()) return std::optional<JobSummary>();
  return std::optional<JobSummary>(JobFromRow(q, 0));
}

absl::StatusOr<JobSeed> Store::LoadJobSeed(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  JobSeed seed;
  XPU_ASSIGN_OR_RETURN(SqlResult owner,
                       read_db_->Query("SELECT uid FROM jobs WHERE job=$1;", Params(job)));
  if (!owner.empty()) seed.owner_uid = owner.Int(0, 0);
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      read_db_->Query("SELECT key, pid, host, start_ticks, records, next_position, "
                      "undefined_signature, uid FROM ranks WHERE job=$1;",
                      Params(job)));
  for (size_t i = 0; i < q.rows(); ++i) {
    RankSeed r;
    r.pid = static_cast<int32_t>(q.Int(i, 1));
    r.host = q.Text(i, 2);
    r.start_ticks = static_cast<uint64_t>(q.Int(i, 3));
    r.records = static_cast<uint64_t>(q.Int(i, 4));
    r.next_position = static_cast<uint64_t>(q.Int(i, 5));
    r.undefined_signature = static_cast<uint64_t>(q.Int(i, 6));
    if (seed.owner_uid < 0) seed.owner_uid = q.Int(i, 7);
    seed.ranks.emplace(q.Text(i, 0), std::move(r));
  }
  return seed;
}

absl::StatusOr<std::vector<RankRow>> Store::LoadRanks(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      read_db_->Query("SELECT key, rank, host, pid, local_rank, liveness, records, dropped, "
                      "last_record_ns, last_seen_ns FROM ranks WHERE job=$1 ORDER BY rank, key;",
                      Params(job)));
  std::vector<RankRow> out;
  for (size_t i = 0; i < q.rows(); ++i) {
    RankRow r;
    r.job = job;
    r.key = q.Text(i, 0);
    r.rank = static_cast<int32_t>(q.Int(i, 1));
    r.host = q.Text(i, 2);
    r.pid = static_cast<int32_t>(q.Int(i, 3));
    r.local_rank = static_cast<int32_t>(q.Int(i, 4));
    r.liveness = q.Text(i, 5);
    r.records = static_cast<uint64_t>(q.Int(i, 6));
    r.dropped = static_cast<uint64_t>(q.Int(i, 7));
    r.last_record_ns = static_cast<uint64_t>(q.Int(i, 8));
    r.last_seen_ns = static_cast<uint64_t>(q.Int(i, 9));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<Diagnosis>> Store::LoadDiagnoses(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      read_db_->Query("SELECT kind, subject, team, severity, ranks, hosts, evidence, "
                      "first_seen_ns, last_seen_ns FROM diagnoses WHERE job=$1 ORDER BY "
                      "first_seen_ns, kind, subject;",
                      Params(job)));
  std::vector<Diagnosis> out;
  for (size_t i = 0; i < q.rows(); ++i) out.push_back(DiagnosisFromRow(job, q, i));
  return out;
}

absl::StatusOr<std::vector<DiagnosisResolution>> Store::LoadDiagnosisResolutions(
    const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(SqlResult q, read_db_->Query("SELECT kind, subject, resolved_ns FROM "
                                                    "diagnosis_resolutions WHERE job=$1;",
                                                    Params(job)));
  std::vector<DiagnosisResolution> out;
  for (size_t i = 0; i < q.rows(); ++i) {
    out.push_back(DiagnosisResolution{job, q.Text(i, 0), q.Text(i, 1),
                                      static_cast<uint64_t>(q.Int(i, 2))});
  }
  return out;
}

absl::StatusOr<std::vector<WindowSummaryRow>> Store::LoadWindows(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  std::vector<WindowSummaryRow> out;
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      read_db_->Query("SELECT window_start_ns, window_end_ns, records, kernels, gemms, "
                      "collectives, memcpys, syncs, host_events, other FROM window_summaries "
                      "WHERE job=$1 ORDER BY window_start_ns;",
                      Params(job)));
  for (size_t i = 0; i < q.rows(); ++i) {
    WindowSummaryRow w;
    w.job = job;
    w.window_start_ns = static_cast<uint64_t>(q.Int(i, 0));
    w.window_end_ns = static_cast<uint64_t>(q.Int(i, 1));
    w.records = static_cast<uint64_t>(q.Int(i, 2));
    w.kinds.kernel = static_cast<uint64_t>(q.Int(i, 3));
    w.kinds.gemm = static_cast<uint64_t>(q.Int(i, 4));
    w.kinds.collective = static_cast<uint64_t>(q.Int(i, 5));
    w.kinds.memcpy = static_cast<uint64_t>(q.Int(i, 6));
    w.kinds.sync = static_cast<uint64_t>(q.Int(i, 7));
    w.kinds.host = static_cast<uint64_t>(q.Int(i, 8));
    w.kinds.other = static_cast<uint64_t>(q.Int(i, 9));
    out.push_back(std::move(w));
  }
  for (WindowSummaryRow& w : out) {
    XPU_ASSIGN_OR_RETURN(
        SqlResult g, read_db_->Query("SELECT signature, count, total_ns, flops FROM window_gemm "
                                     "WHERE job=$1 AND window_start_ns=$2 ORDER BY signature;",
                                     Params(job, w.window_start_ns)));
    for (size_t i = 0; i < g.rows(); ++i) {
      w.gemm.push_back(GemmWindowRow{g.Text(i, 0), static_cast<uint64_t>(g.Int(i, 1)),
                                     static_cast<uint64_t>(g.Int(i, 2)), g.Real(i, 3)});
    }
    XPU_ASSIGN_OR_RETURN(
        SqlResult c,
        read_db_->Query("SELECT op, count, bus_bytes, seconds FROM window_collective WHERE "
                        "job=$1 AND window_start_ns=$2 ORDER BY op;",
                        Params(job, w.window_start_ns)));
    for (size_t i = 0; i < c.rows(); ++i) {
      CollectiveWindowRow cw;
      cw.op = c.Text(i, 0);
      cw.bw.count = static_cast<uint64_t>(c.Int(i, 1));
      cw.bw.bus_bytes = c.Real(i, 2);
      cw.bw.seconds = c.Real(i, 3);
      w.collectives.push_back(cw);
    }
  }
  return out;
}

absl::StatusOr<std::vector<AlertDelivery>> Store::LoadAlertDeliveries(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(
      SqlResult q, read_db_->Query("SELECT kind, subject, first_seen_ns, status, delivered_ns "
                                   "FROM alert_deliveries WHERE job=$1;",
                                   Params(job)));
  std::vector<AlertDelivery> out;
  for (size_t i = 0; i < q.rows(); ++i) {
    out.push_back(AlertDelivery{job, q.Text(i, 0), q.Text(i, 1),
                                static_cast<uint64_t>(q.Int(i, 2)), q.Text(i, 3),
                                static_cast<uint64_t>(q.Int(i, 4))});
  }
  return out;
}

absl::StatusOr<std::vector<history::RunBaseline>> Store::LoadRunBaselines(
    const std::string& job_name, const std::string& gpu_model, bool any_model,
    const std::string& exclude_job, int limit) {
  std::lock_guard<std::mutex> l(read_mu_);
  return history::ReadRunBaselines(*read_db_, job_name, gpu_model, any_model, exclude_job, limit);
}

absl::StatusOr<history::CalibrationRows> Store::LoadCalibration(const std::string& gpu_model) {
  std::lock_guard<std::mutex> l(read_mu_);
  return history::ReadCalibration(*read_db_, gpu_model);
}

}  // namespace xpu::engine::history
