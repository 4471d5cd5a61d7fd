#include "engine/history/schema.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/base/status_macros.h"

namespace xpu::engine::history {
namespace {

// The migration steps, one text for both backends: {int} is a 64-bit
// integer and {real} a double (SQLite: INTEGER and REAL, as shipped;
// PostgreSQL: BIGINT and DOUBLE PRECISION, since its INTEGER is 32-bit and
// its REAL single precision).
const char* const kSteps[] = {
    R"sql(
CREATE TABLE jobs (
  job TEXT PRIMARY KEY, job_name TEXT NOT NULL, first_seen_ns {int} NOT NULL,
  last_seen_ns {int} NOT NULL, ranks {int} NOT NULL, records {int} NOT NULL,
  state TEXT NOT NULL);
CREATE TABLE ranks (
  job TEXT NOT NULL, key TEXT NOT NULL, rank {int} NOT NULL, host TEXT NOT NULL,
  pid {int} NOT NULL, local_rank {int} NOT NULL, liveness TEXT NOT NULL,
  records {int} NOT NULL, dropped {int} NOT NULL, last_record_ns {int} NOT NULL,
  last_seen_ns {int} NOT NULL, PRIMARY KEY (job, key));
CREATE TABLE daemons (
  daemon_id TEXT PRIMARY KEY, host TEXT NOT NULL, version TEXT NOT NULL,
  first_seen_ns {int} NOT NULL, last_seen_ns {int} NOT NULL, batches {int} NOT NULL,
  records {int} NOT NULL, records_dropped {int} NOT NULL);
CREATE TABLE window_summaries (
  job TEXT NOT NULL, window_start_ns {int} NOT NULL, window_end_ns {int} NOT NULL,
  records {int} NOT NULL, kernels {int} NOT NULL, gemms {int} NOT NULL,
  collectives {int} NOT NULL, memcpys {int} NOT NULL, syncs {int} NOT NULL,
  host_events {int} NOT NULL, other {int} NOT NULL, PRIMARY KEY (job, window_start_ns));
CREATE TABLE window_gemm (
  job TEXT NOT NULL, window_start_ns {int} NOT NULL, signature TEXT NOT NULL,
  count {int} NOT NULL, total_ns {int} NOT NULL, flops {real} NOT NULL, tflops {real} NOT NULL,
  PRIMARY KEY (job, window_start_ns, signature));
CREATE TABLE window_collective (
  job TEXT NOT NULL, window_start_ns {int} NOT NULL, op TEXT NOT NULL,
  count {int} NOT NULL, bus_bytes {real} NOT NULL, seconds {real} NOT NULL,
  busbw_bytes_per_second {real} NOT NULL, PRIMARY KEY (job, window_start_ns, op));
CREATE TABLE diagnoses (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, team TEXT NOT NULL,
  severity TEXT NOT NULL, ranks TEXT NOT NULL, hosts TEXT NOT NULL, evidence TEXT NOT NULL,
  first_seen_ns {int} NOT NULL, last_seen_ns {int} NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    // 2: diagnoses that stopped being reported (resolved), for the active
    // flag of Query.Diagnoses and `xpu diagnose`.
    R"sql(
CREATE TABLE diagnosis_resolutions (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, resolved_ns {int} NOT NULL,
  PRIMARY KEY (job, kind, subject));
)sql",
    // 3: history baselines per (job name, GPU model) and `xpu calibrate`
    // results per GPU model (engine/history/baseline_sql.h).
    R"sql(
CREATE TABLE baseline_runs (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, updated_ns {int} NOT NULL,
  windows {int} NOT NULL, steps {int} NOT NULL, step_median_s {real} NOT NULL,
  step_best_s {real} NOT NULL, void_inter {real} NOT NULL, void_minority {real} NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job));
CREATE INDEX baseline_runs_by_time ON baseline_runs (job_name, gpu_model, updated_ns);
CREATE TABLE baseline_gemm (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, signature TEXT NOT NULL,
  dtype TEXT NOT NULL, tflops {real} NOT NULL, count {int} NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, signature));
CREATE TABLE baseline_collective (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, op TEXT NOT NULL,
  bytes {int} NOT NULL, nranks {int} NOT NULL, nodes {int} NOT NULL,
  busbw_bytes_per_second {real} NOT NULL, count {int} NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, op, bytes, nranks, nodes));
CREATE TABLE baseline_issue_latency (
  job_name TEXT NOT NULL, gpu_model TEXT NOT NULL, job TEXT NOT NULL, family TEXT NOT NULL,
  bucket {int} NOT NULL, count {int} NOT NULL,
  PRIMARY KEY (job_name, gpu_model, job, family, bucket));
CREATE TABLE calibration_gemm (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, dtype TEXT NOT NULL, tflops {real} NOT NULL,
  tflops_min {real} NOT NULL, m {int} NOT NULL, n {int} NOT NULL, k {int} NOT NULL,
  devices {int} NOT NULL, measured_ns {int} NOT NULL,
  PRIMARY KEY (gpu_model, host, dtype));
CREATE TABLE calibration_collective (
  gpu_model TEXT NOT NULL, host TEXT NOT NULL, op TEXT NOT NULL, bytes {int} NOT NULL,
  nranks {int} NOT NULL, nodes {int} NOT NULL, time_us {real} NOT NULL,
  algbw_bytes_per_second {real} NOT NULL, busbw_bytes_per_second {real} NOT NULL,
  measured_ns {int} NOT NULL,
  PRIMARY KEY (gpu_model, host, op, bytes, nranks, nodes));
)sql",
    // 4: what a restarted engine needs to count every record once (rank
    // checkpoints: position, process start time), who owns a job, and the
    // losses of a job.
    R"sql(
ALTER TABLE ranks ADD COLUMN next_position {int} NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN start_ticks {int} NOT NULL DEFAULT 0;
ALTER TABLE ranks ADD COLUMN uid {int} NOT NULL DEFAULT -1;
ALTER TABLE ranks ADD COLUMN undefined_signature {int} NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN uid {int} NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN dropped {int} NOT NULL DEFAULT 0;
)sql",
    // 5: engine replicas and the jobs they own (leases.h), and the webhook
    // events already delivered (at most once per episode).
    R"sql(
CREATE TABLE engine_replicas (
  replica_id TEXT PRIMARY KEY, instance TEXT NOT NULL, address TEXT NOT NULL,
  version TEXT NOT NULL, started_ns {int} NOT NULL, heartbeat_ns {int} NOT NULL,
  expires_ns {int} NOT NULL);
CREATE TABLE job_owners (
  job TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch {int} NOT NULL,
  acquired_ns {int} NOT NULL);
CREATE INDEX job_owners_by_owner ON job_owners (owner);
CREATE TABLE alert_deliveries (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, first_seen_ns {int} NOT NULL,
  status TEXT NOT NULL, delivered_ns {int} NOT NULL,
  PRIMARY KEY (job, kind, subject, first_seen_ns, status));
)sql",
};

static_assert(sizeof(kSteps) / sizeof(kSteps[0]) == kSchemaVersion,
              "kSchemaVersion must equal the number of migration steps");

std::string Step(SqlDialect d, int i) {
  const bool pg = d == SqlDialect::kPostgres;
  return absl::StrReplaceAll(kSteps[i], {{"{int}", pg ? "BIGINT" : "INTEGER"},
                                         {"{real}", pg ? "DOUBLE PRECISION" : "REAL"}});
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
