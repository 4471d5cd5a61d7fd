// ownership — this replica's side of the job leases (history/leases.h):
// which jobs it serves, the claim of a job when its first batch arrives,
// the renewal of its lease, and the jobs that moved away.
//
// Check(job) runs on ingest threads for each ProcessBatch. Jobs this
// replica serves are answered from memory. For any other job it claims the
// job in the database (one claim at a time) and, when the claim succeeds,
// calls on_acquired(job) before the job counts as served, so that the job's
// state is loaded from the database before a single record of it is
// applied (takeover.h); a failed load leaves the job unserved and the
// batch unanswered (kUnknown). A job a live replica owns is answered with
// that replica's address, for the daemon's redirect; that answer is cached
// for kForeignCacheNs.
//
// The heartbeat thread renews the lease every ttl/4 and compares the jobs
// the database says this replica owns with the jobs it serves: jobs claimed
// by another replica meanwhile (this one's lease had lapsed) go to
// on_lost, and the engine drops them and redirects their daemons. When
// another instance took the replica id over, on_replaced is called once and
// the engine stops. A heartbeat that cannot reach the database changes
// nothing: the lease may lapse, but nothing moves until another replica
// claims a job, and the store's fencing keeps this replica's writes out of
// jobs it lost.
//
// Thread-safety: all methods are thread-safe. The callbacks run on the
// calling ingest thread (on_acquired) or the heartbeat thread.
#ifndef XPU_ENGINE_REPLICA_OWNERSHIP_H_
#define XPU_ENGINE_REPLICA_OWNERSHIP_H_

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
#include <vector>

#include "absl/status/status.h"
#include "engine/history/leases.h"

namespace xpu::engine::replica {

struct OwnershipOptions {
  std::string replica_id;
  std::string instance;  // this start of the replica
  std::string address;   // where daemons reach this replica
  std::string version;
  double lease_ttl_s = 10;
};

struct Verdict {
  enum Kind { kMine, kElsewhere, kUnknown };
  Kind kind = kUnknown;
  std::string owner;    // kElsewhere: replica id
  std::string address;  // kElsewhere: its address
  std::string error;    // kUnknown: why (database unreachable, load failed)
};

class Ownership {
 public:
  static constexpr uint64_t kForeignCacheNs = 500ull * 1000000ull;

  using Acquired = std::function<absl::Status(const std::string& job)>;
  using Lost = std::function<void(const std::vector<std::string>& jobs)>;
  using Replaced = std::function<void(const absl::Status& why)>;

  Ownership(std::unique_ptr<history::Leases> leases, OwnershipOptions o);
  ~Ownership();

  // Registers the lease and starts the heartbeat.
  absl::Status Start(Acquired on_acquired, Lost on_lost, Replaced on_replaced);
  // Stops the heartbeat; with `resign`, ends the lease now so that the
  // jobs move at once (clean shutdown).
  void Stop(bool resign);

  Verdict Check(const std::string& job);
  // Jobs found owned by another replica elsewhere (the store's fencing):
  // no longer served; on_lost runs for the ones that were.
  void MarkLost(const std::vector<std::string>& jobs);
  // A job this replica gave up itself (finished and retired).
  void Released(const std::string& job);
  bool Serves(const std::string& job) const;
  std::set<std::string> Served() const;
  // Who owns `job` now, from the database (redirects of queries).
  std::optional<history::JobOwner> OwnerOf(const std::string& job);
  history::Leases& leases() { return *leases_; }
  const OwnershipOptions& options() const { return o_; }
  uint64_t ttl_ns() const { return static_cast<uint64_t>(o_.lease_ttl_s * 1e9); }

 private:
  void HeartbeatLoop();
  void HeartbeatOnce();

  std::unique_ptr<history::Leases> leases_;
  const OwnershipOptions o_;
  Acquired on_acquired_;
  Lost on_lost_;
  Replaced on_replaced_;

  std::mutex claim_mu_;  // one claim (or heartbeat comparison) at a time
  mutable std::mutex mu_;
  std::set<std::string> served_;
  struct Foreign {
    history::JobOwner owner;
    uint64_t until_ns = 0;  // steady clock
  };
  std::map<std::string, Foreign> foreign_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool replaced_ = false;
  std::thread heartbeat_;
};

}  // namespace xpu::engine::replica

#endif  // XPU_ENGINE_REPLICA_OWNERSHIP_H_
