#include "engine/history/leases.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace xpu::engine::history {

absl::StatusOr<std::unique_ptr<Leases>> Leases::Open(const std::string& db) {
  XPU_ASSIGN_OR_RETURN(std::unique_ptr<SqlConnection> conn, OpenSqlConnection(db));
  return std::unique_ptr<Leases>(new Leases(std::move(conn)));
}

absl::Status Leases::Register(const ReplicaRow& self, uint64_t ttl_ns) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string now = db_->NowNs();
  XPU_RETURN_IF_ERROR(db_->Run(
      absl::StrCat("INSERT INTO engine_replicas VALUES ($1,$2,$3,$4,", now, ",", now, ",", now,
                   " + $5) ON CONFLICT (replica_id) DO UPDATE SET instance=excluded.instance, "
                   "address=excluded.address, version=excluded.version, "
                   "started_ns=excluded.started_ns, heartbeat_ns=excluded.heartbeat_ns, "
                   "expires_ns=excluded.expires_ns;"),
      Params(self.replica_id, self.instance, self.address, self.version, ttl_ns)));
  self_ = self;
  return absl::OkStatus();
}

absl::StatusOr<std::set<std::string>> Leases::Heartbeat(uint64_t ttl_ns) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string now = db_->NowNs();
  XPU_ASSIGN_OR_RETURN(
      SqlResult r,
      db_->Query(absl::StrCat("UPDATE engine_replicas SET heartbeat_ns=", now,
                              ", expires_ns=", now,
                              " + $3 WHERE replica_id=$1 AND instance=$2 RETURNING replica_id;"),
                 Params(self_.replica_id, self_.instance, ttl_ns)));
  if (r.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica id '", self_.replica_id,
                     "' was taken over by another engine instance (same --replica-id)"));
  }
  XPU_ASSIGN_OR_RETURN(SqlResult jobs, db_->Query("SELECT job FROM job_owners WHERE owner=$1;",
                                                  Params(self_.replica_id)));
  std::set<std::string> out;
  for (size_t i = 0; i < jobs.rows(); ++i) out.insert(jobs.Text(i, 0));
  return out;
}

absl::StatusOr<JobOwner> Leases::OwnerLocked(const std::string& job, bool* found) {
  const std::string now = db_->NowNs();
  XPU_ASSIGN_OR_RETURN(
      SqlResult r,
      db_->Query(absl::StrCat("SELECT o.owner, o.epoch, COALESCE(r.address, ''), CASE WHEN "
                              "r.expires_ns > ",
                              now,
                              " THEN 1 ELSE 0 END FROM job_owners o LEFT JOIN engine_replicas r "
                              "ON r.replica_id = o.owner WHERE o.job=$1;"),
                 Params(job)));
  JobOwner o;
  o.job = job;
  *found = !r.empty();
  if (r.empty()) return o;
  o.owner = r.Text(0, 0);
  o.epoch = static_cast<uint64_t>(r.Int(0, 1));
  o.address = r.Text(0, 2);
  o.owner_alive = r.Int(0, 3) != 0;
  return o;
}

absl::StatusOr<JobOwner> Leases::Acquire(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string now = db_->NowNs();
  // The claim and its condition in one statement: concurrent claims of the
  // same job serialize on its row, and the condition is evaluated against
  // the row the winner left.
  XPU_RETURN_IF_ERROR(db_->Run(
      absl::StrCat("INSERT INTO job_owners VALUES ($1, $2, 1, ", now,
                   ") ON CONFLICT (job) DO UPDATE SET owner=excluded.owner, "
                   "epoch=job_owners.epoch + 1, acquired_ns=excluded.acquired_ns WHERE "
                   "job_owners.owner <> excluded.owner AND NOT EXISTS (SELECT 1 FROM "
                   "engine_replicas r WHERE r.replica_id = job_owners.owner AND r.expires_ns > ",
                   now, ");"),
      Params(job, self_.replica_id)));
  bool found = false;
  return OwnerLocked(job, &found);
}

absl::StatusOr<std::optional<JobOwner>> Leases::Owner(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  bool found = false;
  XPU_ASSIGN_OR_RETURN(JobOwner o, OwnerLocked(job, &found));
  if (!found) return std::optional<JobOwner>();
  return std::optional<JobOwner>(std::move(o));
}

absl::StatusOr<std::vector<JobOwner>> Leases::OwnedElsewhere() {
  std::lock_guard<std::mutex> l(mu_);
  const std::string now = db_->NowNs();
  XPU_ASSIGN_OR_RETURN(
      SqlResult r, db_->Query(absl::StrCat("SELECT o.job, o.owner, o.epoch, r.address FROM "
                                           "job_owners o JOIN engine_replicas r ON r.replica_id "
                                           "= o.owner WHERE o.owner <> $1 AND r.expires_ns > ",
                                           now, " ORDER BY o.job;"),
                              Params(self_.replica_id)));
  std::vector<JobOwner> out;
  for (size_t i = 0; i < r.rows(); ++i) {
    out.push_back(JobOwner{r.Text(i, 0), r.Text(i, 1), r.Text(i, 3),
                           static_cast<uint64_t>(r.Int(i, 2)), true});
  }
  return out;
}

absl::StatusOr<std::vector<ReplicaRow>> Leases::Replicas() {
  std::lock_guard<std::mutex> l(mu_);
  const std::string now = db_->NowNs();
  XPU_ASSIGN_OR_RETURN(
      SqlResult r,
      db_->Query(absl::StrCat("SELECT r.replica_id, r.instance, r.address, r.version, "
                              "r.started_ns, r.heartbeat_ns, r.expires_ns, CASE WHEN "
                              "r.expires_ns > ",
                              now,
                              " THEN 1 ELSE 0 END, (SELECT COUNT(*) FROM job_owners o WHERE "
                              "o.owner = r.replica_id) FROM engine_replicas r ORDER BY "
                              "r.replica_id;"),
                 {}));
  std::vector<ReplicaRow> out;
  for (size_t i = 0; i < r.rows(); ++i) {
    ReplicaRow row;
    row.replica_id = r.Text(i, 0);
    row.instance = r.Text(i, 1);
    row.address = r.Text(i, 2);
    row.version = r.Text(i, 3);
    row.started_ns = static_cast<uint64_t>(r.Int(i, 4));
    row.heartbeat_ns = static_cast<uint64_t>(r.Int(i, 5));
    row.expires_ns = static_cast<uint64_t>(r.Int(i, 6));
    row.alive = r.Int(i, 7) != 0;
    row.jobs = static_cast<uint32_t>(r.Int(i, 8));
    out.push_back(std::move(row));
  }
  return out;
}

absl::Status Leases::Resign() {
  std::lock_guard<std::mutex> l(mu_);
  if (self_.replica_id.empty()) return absl::OkStatus();
  return db_->Run("UPDATE engine_replicas SET expires_ns=0 WHERE replica_id=$1 AND instance=$2;",
                  Params(self_.replica_id, self_.instance));
}

}  // namespace xpu::engine::history
