#include "engine/history/store.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
      "INSERT INTO jobs VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (job) DO UPDATE SET "
      "job_name=excluded.job_name, first_seen_ns=CASE WHEN jobs.first_seen_ns < "
      "excluded.first_seen_ns THEN jobs.first_seen_ns ELSE excluded.first_seen_ns END, "
      "last_seen_ns=excluded.last_seen_ns, ranks=excluded.ranks, records=excluded.records, "
      "state=excluded.state;",
      Params(j.job, j.job_name, j.first_seen_ns, j.last_seen_ns, j.ranks, j.records, j.state));
}

absl::Status WriteRow(SqlConnection& db, const RankRow& r) {
  return db.Run(
      "INSERT INTO ranks VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT (job, key) DO "
      "UPDATE SET rank=excluded.rank, host=excluded.host, pid=excluded.pid, "
      "local_rank=excluded.local_rank, liveness=excluded.liveness, records=excluded.records, "
      "dropped=excluded.dropped, last_record_ns=excluded.last_record_ns, "
      "last_seen_ns=excluded.last_seen_ns;",
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

// Never moves backwards: a late row of an older window must not undo a newer one.
absl::Status WriteRow(SqlConnection& db, const StreamSeqRow& s) {
  return db.Run(
      "INSERT INTO job_stream_seq VALUES ($1,$2,$3,$4) ON CONFLICT (job, stream) DO UPDATE SET "
      "seq=CASE WHEN excluded.seq > job_stream_seq.seq THEN excluded.seq ELSE job_stream_seq.seq "
      "END, updated_ns=excluded.updated_ns;",
      Params(s.job, s.stream, s.seq, s.updated_ns));
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
  return j;
}

constexpr char kJobColumns[] =
    "SELECT job, job_name, first_seen_ns, last_seen_ns, ranks, records, state FROM jobs";

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& db) {
  std::unique_ptr<Store> s(new Store());
  XPU_ASSIGN_OR_RETURN(s->write_db_, OpenSqlConnection(db));
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
void Store::EnqueueStreamSeq(const StreamSeqRow& r) { Enqueue(r); }
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

void Store::WriterLoop() {
  auto backoff = std::chrono::steady_clock::duration(kRetryFirst);
  auto next_retry = std::chrono::steady_clock::time_point::min();
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    // At stop, rows waiting for a retry get one last attempt.
    const bool retry_due = !retry_.empty() && (now >= next_retry || stop_);
    if (!retry_.empty() && !retry_due && !queue_.empty()) {
      // The database is away: new rows wait behind the old ones, in order;
      // whoever flushes or waits on a barrier hears so now.
      std::vector<Op> parked;
      parked.swap(queue_);
      processed_ += parked.size();
      std::vector<std::function<void()>> calls;
      FinishBarriers(parked, absl::UnavailableError(stats_.last_error), &calls);
      for (Op& op : parked) retry_.push_back(std::move(op));
      if (error_.ok()) error_ = absl::UnavailableError(stats_.last_error);
      done_cv_.notify_all();
      l.unlock();
      for (auto& c : calls) c();
      l.lock();
      continue;
    }
    if (queue_.empty() && (retry_.empty() || !retry_due)) {
      if (stop_) break;
      if (retry_.empty()) {
        cv_.wait(l);
      } else {
        cv_.wait_until(l, next_retry);
      }
      continue;
    }
    std::vector<Op> ops;
    ops.swap(retry_);
    const uint64_t fresh = queue_.size();
    for (Op& op : queue_) ops.push_back(std::move(op));
    queue_.clear();
    l.unlock();
    WriteBatch(std::move(ops));
    l.lock();
    processed_ += fresh;
    if (retry_.empty()) {
      backoff = kRetryFirst;
      stats_.degraded = false;
    } else {
      next_retry = std::chrono::steady_clock::now() + backoff;
      backoff = std::min<std::chrono::steady_clock::duration>(backoff * 2, kRetryMax);
      stats_.degraded = true;
      if (stop_) {
        // Shutting down with the database away: what could not be written
        // is lost, and counted.
        stats_.rows_dropped += retry_.size();
        Log()->error("stopping with {} rows not written: {}", retry_.size(), stats_.last_error);
        retry_.clear();
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

void Store::WriteBatch(std::vector<Op> ops) {
  std::vector<std::function<void()>> calls;  // barrier callbacks, run without mu_
  WriteBatchInto(std::move(ops), &calls);
  for (auto& c : calls) c();
}

void Store::WriteBatchInto(std::vector<Op> ops, std::vector<std::function<void()>>* calls) {
  Attempt a = Write(ops);
  std::unique_lock<std::mutex> l(mu_);
  if (a.status.ok()) {
    stats_.transactions++;
    stats_.rows_written += a.rows;
    stats_.rows_fenced += a.fenced_rows;
    fenced_jobs_.insert(a.fenced_jobs.begin(), a.fenced_jobs.end());
    FinishBarriers(ops, absl::OkStatus(), calls);
    return;
  }
  stats_.failures++;
  stats_.last_error = std::string(a.status.message());
  if (error_.ok()) error_ = a.status;
  if (g_write_log.Allow()) {
    Log()->error("write to {} failed ({} rows{}): {}", description_, ops.size(),
                 a.transient ? ", kept for a retry" : ", retried one by one",
                 std::string(a.status.message()));
  }
  if (a.transient) {
    FinishBarriers(ops, a.status, calls);
    for (Op& op : ops) retry_.push_back(std::move(op));
    if (retry_.size() > kMaxRetryRows) {
      const size_t drop = retry_.size() - kMaxRetryRows;
      stats_.rows_dropped += drop;
      retry_.erase(retry_.begin(), retry_.begin() + static_cast<std::ptrdiff_t>(drop));
    }
    return;
  }
  // A row the database refuses: write the others one by one; drop only
  // the ones that fail (or park the rest should the database go away).
  l.unlock();
  std::vector<Op> kept;
  absl::Status barrier_status;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (std::holds_alternative<Barrier>(ops[i])) {
      kept.push_back(std::move(ops[i]));
      continue;
    }
    Attempt one = Write({ops[i]});
    std::lock_guard<std::mutex> g(mu_);
    if (one.status.ok()) {
      stats_.transactions++;
      stats_.rows_written += one.rows;
      stats_.rows_fenced += one.fenced_rows;
      fenced_jobs_.insert(one.fenced_jobs.begin(), one.fenced_jobs.end());
    } else if (one.transient) {
      stats_.failures++;
      stats_.last_error = std::string(one.status.message());
      barrier_status = one.status;
      for (size_t j = i; j < ops.size(); ++j) {
        if (std::holds_alternative<Barrier>(ops[j])) {
          kept.push_back(std::move(ops[j]));
        } else {
          retry_.push_back(std::move(ops[j]));
        }
      }
      break;
    } else {
      stats_.failures++;
      stats_.last_error = std::string(one.status.message());
      stats_.rows_dropped++;
      if (g_write_log.Allow()) {
        Log()->error("dropping a row {} refuses: {}", description_,
                     std::string(one.status.message()));
      }
    }
  }
  l.lock();
  FinishBarriers(kept, barrier_status, calls);
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
  std::string operator()(const StreamSeqRow& s) const { return s.job; }
  std::string operator()(const AlertDelivery& a) const { return a.job; }
  template <typename T>
  std::string operator()(const T&) const {
    return "";
  }
};

}  // namespace

Store::Attempt Store::Write(const std::vector<Op>& ops) {
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

absl::StatusOr<std::map<std::string, uint64_t>> Store::LoadStreamSeqs(const std::string& job) {
  std::lock_guard<std::mutex> l(read_mu_);
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      read_db_->Query("SELECT stream, seq FROM job_stream_seq WHERE job=$1;", Params(job)));
  std::map<std::string, uint64_t> out;
  for (size_t i = 0; i < q.rows(); ++i) out[q.Text(i, 0)] = static_cast<uint64_t>(q.Int(i, 1));
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
