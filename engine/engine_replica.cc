// Engine replicas sharing one PostgreSQL database: the Engine's side of
// replica/ownership.h (see engine.h).
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "engine/engine.h"
#include "engine/history/leases.h"
#include "engine/history/sql.h"

namespace xpu::engine {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("replica");
  return log;
}

// Where daemons reach this replica: --advertise-addr, else --listen with the
// port the server got.
absl::StatusOr<std::string> AdvertiseAddress(const EngineOptions& o, int port) {
  if (!o.advertise_addr.empty()) return o.advertise_addr;
  const size_t colon = o.listen.rfind(':');
  std::string host = colon == std::string::npos ? o.listen : o.listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::" ||
      absl::StartsWith(o.listen, "unix:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", o.listen, " names no address other replicas' daemons can reach: give "
        "--advertise-addr HOST:PORT"));
  }
  return absl::StrCat(host, ":", port);
}

// Windows a diagnosis carried over by a takeover stays active without being
// reported, beyond --resolve-after-windows.
constexpr int kTakeoverGraceWindows = 2;

}  // namespace

absl::Status Engine::CheckReplicaOptions(const EngineOptions& o) {
  if (o.replica_id.empty()) {
    if (!o.advertise_addr.empty() || o.lease_ttl_s > 0) {
      return absl::InvalidArgumentError("--advertise-addr and --lease-ttl-s need --replica-id");
    }
    return absl::OkStatus();
  }
  if (!history::IsPostgresUrl(o.db)) {
    return absl::InvalidArgumentError(
        "--replica-id needs a PostgreSQL --db (postgresql://...): replicas share their "
        "history and job leases there");
  }
  if (o.replica_id.size() > 128) {
    return absl::InvalidArgumentError("--replica-id: at most 128 characters");
  }
  return absl::OkStatus();
}

absl::Status Engine::StartReplica(const EngineOptions& o) {
  if (o.replica_id.empty()) return absl::OkStatus();
  replica::OwnershipOptions ro;
  ro.replica_id = o.replica_id;
  ro.instance = engine_id_;
  XPU_ASSIGN_OR_RETURN(ro.address, AdvertiseAddress(o, port_));
  ro.version = flags::Version();
  ro.lease_ttl_s = o.lease_ttl_s > 0 ? o.lease_ttl_s : std::max(1.0, o.window_s / 2);
  XPU_ASSIGN_OR_RETURN(std::unique_ptr<history::Leases> leases, history::Leases::Open(o.db));
  // Rows of a job are written only while this replica owns it.
  store_->SetFencingOwner(o.replica_id);
  ownership_ = std::make_unique<replica::Ownership>(std::move(leases), ro);
  XPU_RETURN_IF_ERROR(ownership_->Start(
      [this](const std::string& job) { return TakeOver(job); },
      [this](const std::vector<std::string>& jobs) { OnJobsLost(jobs); },
      [this](const absl::Status& why) { OnReplaced(why); }));
  serving_.store(ownership_.get());
  Log()->info("engine replica {} serves at {} (lease {:.1f} s)", ro.replica_id, ro.address,
              ro.lease_ttl_s);
  return absl::OkStatus();
}

JobRoute Engine::Route(const std::string& job) {
  JobRoute r;
  replica::Ownership* own = serving_.load();
  if (own == nullptr) {
    r.kind = JobRoute::kUnavailable;
    r.error = "this engine replica is not serving jobs (starting, or replaced)";
    return r;
  }
  const replica::Verdict v = own->Check(job);
  switch (v.kind) {
    case replica::Verdict::kMine:
      r.kind = JobRoute::kHere;
      break;
    case replica::Verdict::kElsewhere:
      r.kind = JobRoute::kElsewhere;
      r.replica_id = v.owner;
      r.address = v.address;
      break;
    case replica::Verdict::kUnknown:
      r.kind = JobRoute::kUnavailable;
      r.error = v.error;
      break;
  }
  return r;
}

absl::Status Engine::TakeOver(const std::string& job) {
  // A copy from an earlier turn of this replica is stale: the registry's
  // seeder loads the job's checkpoints afresh when its first batch arrives.
  registry_.DropJob(job);
  Takeover t;
  t.job = job;
  XPU_ASSIGN_OR_RETURN(const std::vector<Diagnosis> diagnoses, store_->LoadDiagnoses(job));
  XPU_ASSIGN_OR_RETURN(const std::vector<history::DiagnosisResolution> resolutions,
                       store_->LoadDiagnosisResolutions(job));
  XPU_ASSIGN_OR_RETURN(const std::vector<history::AlertDelivery> deliveries,
                       store_->LoadAlertDeliveries(job));
  std::map<std::pair<std::string, std::string>, uint64_t> resolved;
  for (const history::DiagnosisResolution& r : resolutions)
    resolved[{r.kind, r.subject}] = r.resolved_ns;
  std::set<std::tuple<std::string, std::string, uint64_t, std::string>> delivered;
  for (const history::AlertDelivery& a : deliveries)
    delivered.insert({a.kind, a.subject, a.first_seen_ns, a.status});
  // Without a webhook nothing is recorded: Alertmanager takes an alert
  // again as the same alert, so nothing is announced anew.
  const bool webhook = !options_.webhook_url.empty();
  for (const Diagnosis& d : diagnoses) {
    const bool fired =
        !webhook || delivered.count({d.kind, d.subject, d.first_seen_ns, "firing"}) > 0;
    auto r = resolved.find({d.kind, d.subject});
    if (r == resolved.end()) {
      t.active.emplace_back(d, fired);
    } else if (webhook && fired &&
               !delivered.count({d.kind, d.subject, d.first_seen_ns, "resolved"})) {
      t.resolutions.push_back(ResolvedDiagnosis{d, r->second});
    }
  }
  Log()->info("job {}: taken over with {} active diagnos{}", job, t.active.size(),
              t.active.size() == 1 ? "is" : "es");
  std::lock_guard<std::mutex> l(replica_mu_);
  lost_.erase(job);
  takeovers_.push_back(std::move(t));
  return absl::OkStatus();
}

void Engine::OnJobsLost(const std::vector<std::string>& jobs) {
  for (const std::string& job : jobs) {
    registry_.DropJob(job);
    Log()->warn("job {} is served by another replica now; dropped here", job);
  }
  std::lock_guard<std::mutex> l(replica_mu_);
  lost_.insert(jobs.begin(), jobs.end());
}

void Engine::OnReplaced(const absl::Status& why) {
  serving_.store(nullptr);
  {
    std::lock_guard<std::mutex> l(mu_);
    exit_status_ = absl::FailedPreconditionError(why.message());
    stopping_ = true;
  }
  cv_.notify_all();
}

std::vector<xpu::v1::ReplicaInfo> Engine::ListReplicas() {
  std::vector<xpu::v1::ReplicaInfo> out;
  replica::Ownership* own = serving_.load();
  if (own == nullptr) return out;
  absl::StatusOr<std::vector<history::ReplicaRow>> rows = own->leases().Replicas();
  if (!rows.ok()) return out;  // the database is away: the store's status says so
  for (const history::ReplicaRow& r : *rows) {
    xpu::v1::ReplicaInfo& i = out.emplace_back();
    i.set_replica_id(r.replica_id);
    i.set_address(r.address);
    i.set_alive(r.alive);
    i.set_jobs(r.jobs);
    i.set_heartbeat_ns(r.heartbeat_ns);
    i.set_version(r.version);
  }
  return out;
}

absl::Status Engine::exit_status() {
  std::lock_guard<std::mutex> l(mu_);
  return exit_status_;
}

void Engine::ApplyReplicaChanges() {
  std::vector<Takeover> takeovers;
  std::set<std::string> lost;
  {
    std::lock_guard<std::mutex> l(replica_mu_);
    takeovers.swap(takeovers_);
    lost.swap(lost_);
  }
  for (const std::string& job : lost) {
    if (tracker_) tracker_->Forget(job);
    busbw_ops_.erase(job);
    metrics_.ForgetJob(job);
  }
  if (!tracker_) return;
  for (const Takeover& t : takeovers) {
    tracker_->Forget(t.job);
    // The window of the takeover and the one before it (the previous
    // owner's last) hold only part of the job's records.
    for (const auto& [d, fired] : t.active) tracker_->Seed(d, fired, kTakeoverGraceWindows);
    for (const ResolvedDiagnosis& r : t.resolutions) tracker_->SeedResolved(r);
  }
}

void Engine::ReleaseJob(const std::string& job) {
  if (!ownership_) return;
  ownership_->Released(job);
  store_->EnqueueRelease(job, options_.replica_id);
}

}  // namespace xpu::engine
