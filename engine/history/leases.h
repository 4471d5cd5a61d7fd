// leases — which engine replica serves which job, kept in the database the
// replicas share (tables engine_replicas and job_owners, schema.h).
//
// A replica holds a lease: its engine_replicas row, renewed by Heartbeat()
// every few seconds, valid until expires_ns. A job belongs to the replica
// named in job_owners while that replica's lease is valid; Acquire() takes
// a job that has no owner, or whose owner's lease has expired, in one
// atomic upsert (the database decides; no replica trusts another's word).
// Times are the database's clock (SqlConnection::NowNs), never an
// engine's, so clock skew between hosts does not move jobs.
//
// The owner of a job never changes while its lease is renewed: an expired
// lease alone moves nothing, a claim does. A replica that finds on its next
// heartbeat that a job was claimed by another gives it up (ownership.h);
// the store's fencing (store.h) keeps its late writes out meanwhile.
//
// A restarted replica with the same replica id registers a new instance
// and owns its jobs again at once; the older instance, should it still
// run, learns from its next heartbeat that it was replaced.
//
// Thread-safety: all methods are thread-safe (one connection, one mutex).
#ifndef XPU_ENGINE_HISTORY_LEASES_H_
#define XPU_ENGINE_HISTORY_LEASES_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/history/sql.h"

namespace xpu::engine::history {

struct ReplicaRow {
  std::string replica_id;
  std::string instance;  // one start of the replica (pid and start time)
  std::string address;   // host:port where daemons reach its Ingest service
  std::string version;
  uint64_t started_ns = 0;
  uint64_t heartbeat_ns = 0;  // database clock
  uint64_t expires_ns = 0;
  bool alive = false;  // expires_ns is in the database's future
  uint32_t jobs = 0;   // jobs it owns
};

struct JobOwner {
  std::string job;
  std::string owner;    // replica id
  std::string address;  // "" when the owner has no replica row
  uint64_t epoch = 0;   // bumped by each change of owner
  bool owner_alive = false;
};

class Leases {
 public:
  // Opens its own connection; the schema must exist (Store::Open migrates).
  static absl::StatusOr<std::unique_ptr<Leases>> Open(const std::string& db);

  // Registers `self` (replica_id, instance, address, version) with a lease
  // of `ttl_ns`, replacing an older instance of the same replica id.
  absl::Status Register(const ReplicaRow& self, uint64_t ttl_ns);
  // Renews the lease; returns the jobs this replica owns. FAILED_PRECONDITION
  // when another instance took the replica id over.
  absl::StatusOr<std::set<std::string>> Heartbeat(uint64_t ttl_ns);
  // Claims `job` for this replica when it has no owner, or its owner's lease
  // has expired; returns the owner after the attempt (maybe this replica).
  absl::StatusOr<JobOwner> Acquire(const std::string& job);
  absl::StatusOr<std::optional<JobOwner>> Owner(const std::string& job);
  // Jobs owned by replicas other than this one whose lease is valid.
  absl::StatusOr<std::vector<JobOwner>> OwnedElsewhere();
  absl::StatusOr<std::vector<ReplicaRow>> Replicas();
  // Ends this replica's lease now (clean shutdown): its jobs can be claimed
  // at once by the replicas their daemons reach next.
  absl::Status Resign();

  const std::string& replica_id() const { return self_.replica_id; }

 private:
  explicit Leases(std::unique_ptr<SqlConnection> db) : db_(std::move(db)) {}
  absl::StatusOr<JobOwner> OwnerLocked(const std::string& job, bool* found);

  std::mutex mu_;
  std::unique_ptr<SqlConnection> db_;
  ReplicaRow self_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_LEASES_H_
