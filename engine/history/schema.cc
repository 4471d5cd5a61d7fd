#include "engine/history/schema.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace xpu::engine::history {
namespace {

// SQLite steps 1-4, as shipped.
const char* const kSqliteSteps[] = {
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

// PostgreSQL steps 1-4: the same tables with 64-bit integers and doubles
// (PostgreSQL's INTEGER is 32-bit and its REAL single precision).
const char* const kPostgresSteps[] = {
    R"sql(
CREATE TABLE jobs (
  job TEXT PRIMARY KEY, job_name TEXT NOT NULL, first_seen_ns BIGINT NOT NULL,
  last_seen_ns BIGINT NOT NULL, ranks BIGINT NOT NULL, records BIGINT NOT NULL,
  state TEXT NOT NULL);
CREATE TABLE ranks (
  job TEXT NOT NULL, key TEXT NOT NULL, rank BIGINT NOT NULL, host TEXT NOT NULL,
  pid BIGINT NOT NULL, local_rank BIGINT NOT NULL, liveness TEXT NOT NULL,
  records BIGINT NOT NULL, dropped BIGINT NOT NULL, last_record_ns BIGINT NOT NULL,
  last_seen_ns BIGINT NOT NULL, PRIMARY KEY (job, key));
CREATE TABLE daemons (
  daemon_id TEXT PRIMARY KEY, host TEXT NOT NULL, version TEXT NOT NULL,
  first_seen_ns BIGINT NOT NULL, last_seen_ns BIGINT NOT NULL, batches BIGINT NOT NULL,
  records BIGINT NOT NULL, records_dropped BIGINT NOT NULL);
CREATE TABLE window_summaries (
  job TEXT NOT NULL, window_start_ns BIGINT NOT NULL, window_end_ns BIGINT NOT NULL,
  records BIGINT NOT NULL, kernels BIGINT NOT NULL, gemms BIGINT NOT NULL,
  collectives BIGINT NOT NULL, memcpys BIGINT NOT NULL, syncs BIGINT NOT NULL,
  host_events BIGINT NOT NULL, other BIGINT NOT NULL, PRIMARY KEY (job, window_start_ns));
CREATE TABLE window_gemm (
  job TEXT NOT NULL, window_start_ns BIGINT NOT NULL, signature TEXT NOT NULL,
  count BIGINT NOT NULL, total_ns BIGINT NOT NULL, flops DOUBLE PRECISION NOT NULL,
  tflops DOUBLE PRECISION NOT NULL, PRIMARY KEY (job, window_start_ns, signature));
CREATE TABLE window_collective (
  job TEXT NOT NULL, window_start_ns BIGINT NOT NULL, op TEXT NOT NULL,
  count BIGINT NOT NULL, bus_bytes DOUBLE PRECISION NOT NULL, seconds DOUBLE PRECISION NOT NULL,
  busbw_bytes_per_second DOUBLE PRECISION NOT NULL, PRIMARY KEY (job, window_start_ns, op));
CREATE TABLE diagnoses (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, team TEXT NOT NULL,
  severity TEXT NOT NULL, ranks TEXT NOT NULL, hosts TEXT NOT NULL, evidence TEXT NOT NULL,
  first_seen_ns BIGINT NOT NULL, last_seen_ns BIGINT NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    R"sql(
CREATE TABLE diagnosis_resolutions (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, resolved_ns BIGINT NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    R"sql(
CREATE TABLE baseline_runs (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, updated_ns BIGINT NOT NULL,
  windows BIGINT NOT NULL, steps BIGINT NOT NULL, step_median_s DOUBLE PRECISION NOT NULL,
  step_best_s DOUBLE PRECISION NOT NULL, void_inter DOUBLE PRECISION NOT NULL,
  void_minority DOUBLE PRECISION NOT NULL, PRIMARY KEY (job_name, gpu_model, job));
CREATE INDEX baseline_runs_by_time ON baseline_runs (job_name, gpu_model, updated_ns);
CREATE TABLE baseline_gemm (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, signature TEXT NOT NULL,
  dtype TEXT NOT NULL, tflops DOUBLE PRECISION NOT NULL, count BIGINT NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, signature));
CREATE TABLE baseline_collective (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, op TEXT NOT NULL,
  bytes BIGINT NOT NULL, nranks BIGINT NOT NULL, nodes BIGINT NOT NULL,
  busbw_bytes_per_second DOUBLE PRECISION NOT NULL, count BIGINT NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, op, bytes, nranks, nodes));
CREATE TABLE baseline_issue_latency (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, family TEXT NOT NULL,
  bucket BIGINT NOT NULL, count BIGINT NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, family, bucket));
CREATE TABLE calibration_gemm (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, dtype TEXT NOT NULL,
  tflops DOUBLE PRECISION NOT NULL, tflops_min DOUBLE PRECISION NOT NULL, m BIGINT NOT NULL,
  n BIGINT NOT NULL, k BIGINT NOT NULL, devices BIGINT NOT NULL, measured_ns BIGINT NOT NULL,
  PRIMARY KEY (gpu_model, host, dtype));
CREATE TABLE calibration_collective (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, op TEXT NOT NULL, bytes BIGINT NOT NULL,
  nranks BIGINT NOT NULL, nodes BIGINT NOT NULL, time_us DOUBLE PRECISION NOT NULL,
  algbw_bytes_per_second DOUBLE PRECISION NOT NULL,
  busbw_bytes_per_second DOUBLE PRECISION NOT NULL, measured_ns BIGINT NOT NULL,
  PRIMARY KEY (gpu_model, host, op, bytes, nranks, nodes));
)sql",
    R"sql(
ALTER TABLE ranks ADD COLUMN next_position BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN start_ticks BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN uid BIGINT NOT NULL DEFAULT -1;
ALTER TABLE ranks ADD COLUMN undefined_signature BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN uid BIGINT NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN dropped BIGINT NOT NULL DEFAULT 0;
)sql",
};

// Steps from 5 on: one text for both backends.
const char* const kSharedSteps[] = {
    // 5: engine replicas and the jobs they own (leases.h), and the webhook
    // events already delivered (at most once per episode).
    R"sql(
CREATE TABLE engine_replicas (
  replica_id TEXT PRIMARY KEY, instance TEXT NOT NULL, address TEXT NOT NULL,
  version TEXT NOT NULL, started_ns BIGINT NOT NULL, heartbeat_ns BIGINT NOT NULL,
  expires_ns BIGINT NOT NULL);
CREATE TABLE job_owners (
  job TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch BIGINT NOT NULL,
  acquired_ns BIGINT NOT NULL);
CREATE INDEX job_owners_by_owner ON job_owners (owner);
CREATE TABLE alert_deliveries (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, first_seen_ns BIGINT NOT NULL,
  status TEXT NOT NULL, delivered_ns BIGINT NOT NULL,
  PRIMARY KEY (job, kind, subject, first_seen_ns, status));
)sql",
};

static_assert(sizeof(kSqliteSteps) == sizeof(kPostgresSteps), "one twin per early step");
static_assert((sizeof(kSqliteSteps) + sizeof(kSharedSteps)) / sizeof(const char*) ==
                  kSchemaVersion,
              "kSchemaVersion must equal the number of migration steps");

const char* Step(SqlDialect d, int i) {
  constexpr int kEarly = sizeof(kSqliteSteps) / sizeof(kSqliteSteps[0]);
  if (i < kEarly) return d == SqlDialect::kSqlite ? kSqliteSteps[i] : kPostgresSteps[i];
  return kSharedSteps[i - kEarly];
}

absl::Status MigrateLocked(SqlConnection& db) {
  XPU_RETURN_IF_ERROR(
      db.Exec("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);"));
  XPU_ASSIGN_OR_RETURN(const int version, ReadSchemaVersion(db));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", db.Describe(), " has schema version ", version,
        ", newer than this engine's ", kSchemaVersion, "; use a newer xpu-engine or another --db"));
  }
  for (int step = version; step < kSchemaVersion; ++step) {
    absl::Status st = db.Begin();
    if (st.ok()) st = db.Exec(Step(db.dialect(), step));
    if (st.ok()) st = db.Exec("DELETE FROM schema_version;");
    if (st.ok()) st = db.Run("INSERT INTO schema_version VALUES ($1);", Params(step + 1));
    if (st.ok()) st = db.Exec("COMMIT;");
    if (!st.ok()) {
      db.Exec("ROLLBACK;").IgnoreError();
      return absl::InternalError(absl::StrCat("migrating ", db.Describe(), " to schema ",
                                              step + 1, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> ReadSchemaVersion(SqlConnection& db) {
  XPU_ASSIGN_OR_RETURN(SqlResult r, db.Query("SELECT MAX(version) FROM schema_version;", {}));
  return r.empty() || r.IsNull(0, 0) ? 0 : static_cast<int>(r.Int(0, 0));
}

absl::Status Migrate(SqlConnection& db) {
  if (db.dialect() != SqlDialect::kPostgres) return MigrateLocked(db);
  XPU_RETURN_IF_ERROR(db.Run("SELECT pg_advisory_lock($1);", Params(kMigrationLockKey)));
  absl::Status st = MigrateLocked(db);
  db.Run("SELECT pg_advisory_unlock($1);", Params(kMigrationLockKey)).IgnoreError();
  return st;
}

}  // namespace xpu::engine::history
