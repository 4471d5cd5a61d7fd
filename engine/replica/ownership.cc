#include "engine/replica/ownership.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"

namespace xpu::engine::replica {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("replica");
  return log;
}

logging::RateLimiter g_heartbeat_log(1, 30 * 1000000000ull);

}  // namespace

Ownership::Ownership(std::unique_ptr<history::Leases> leases, OwnershipOptions o)
    : leases_(std::move(leases)), o_(std::move(o)) {}

Ownership::~Ownership() { Stop(false); }

absl::Status Ownership::Start(Acquired on_acquired, Lost on_lost, Replaced on_replaced) {
  on_acquired_ = std::move(on_acquired);
  on_lost_ = std::move(on_lost);
  on_replaced_ = std::move(on_replaced);
  history::ReplicaRow self;
  self.replica_id = o_.replica_id;
  self.instance = o_.instance;
  self.address = o_.address;
  self.version = o_.version;
  if (absl::Status st = leases_->Register(self, ttl_ns()); !st.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot register replica '", o_.replica_id, "': ", st.message()));
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

void Ownership::Stop(bool resign) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && !heartbeat_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (resign) {
    if (absl::Status st = leases_->Resign(); !st.ok()) {
      Log()->warn("could not end the lease of replica {} (its jobs move when it expires): {}",
                  o_.replica_id, std::string(st.message()));
    }
  }
}

Verdict Ownership::Check(const std::string& job) {
  Verdict v;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (served_.count(job)) {
      v.kind = Verdict::kMine;
      return v;
    }
    auto it = foreign_.find(job);
    if (it != foreign_.end() && MonotonicNs() < it->second.until_ns) {
      v.kind = Verdict::kElsewhere;
      v.owner = it->second.owner.owner;
      v.address = it->second.owner.address;
      return v;
    }
  }
  std::lock_guard<std::mutex> claim(claim_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (served_.count(job)) {  // claimed by another thread meanwhile
      v.kind = Verdict::kMine;
      return v;
    }
  }
  absl::StatusOr<history::JobOwner> owner = leases_->Acquire(job);
  if (!owner.ok()) {
    v.error = absl::StrCat("cannot tell which engine replica serves job ", job, ": ",
                           owner.status().message());
    return v;
  }
  if (owner->owner == o_.replica_id) {
    if (on_acquired_) {
      if (absl::Status st = on_acquired_(job); !st.ok()) {
        v.error = absl::StrCat("cannot load job ", job, " from the database: ", st.message());
        return v;
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    served_.insert(job);
    foreign_.erase(job);
    v.kind = Verdict::kMine;
    Log()->info("replica {} serves job {} (epoch {})", o_.replica_id, job, owner->epoch);
    return v;
  }
  if (owner->address.empty()) {
    v.error = absl::StrCat("job ", job, " is owned by replica ", owner->owner,
                           ", which has no address");
    return v;
  }
  std::lock_guard<std::mutex> l(mu_);
  foreign_[job] = Foreign{*owner, MonotonicNs() + kForeignCacheNs};
  v.kind = Verdict::kElsewhere;
  v.owner = owner->owner;
  v.address = owner->address;
  return v;
}

void Ownership::MarkLost(const std::vector<std::string>& jobs) {
  std::vector<std::string> lost;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& j : jobs) {
      if (served_.erase(j)) lost.push_back(j);
    }
  }
  if (!lost.empty() && on_lost_) on_lost_(lost);
}

void Ownership::Released(const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  served_.erase(job);
}

bool Ownership::Serves(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  return served_.count(job) > 0;
}

std::set<std::string> Ownership::Served() const {
  std::lock_guard<std::mutex> l(mu_);
  return served_;
}

std::optional<history::JobOwner> Ownership::OwnerOf(const std::string& job) {
  absl::StatusOr<std::optional<history::JobOwner>> o = leases_->Owner(job);
  if (!o.ok()) return std::nullopt;
  return *o;
}

void Ownership::HeartbeatLoop() {
  const auto period =
      std::chrono::milliseconds(std::max<int64_t>(50, static_cast<int64_t>(o_.lease_ttl_s * 250)));
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_ && !replaced_) {
    if (cv_.wait_for(l, period, [&] { return stop_; })) break;
    l.unlock();
    HeartbeatOnce();
    l.lock();
  }
}

void Ownership::HeartbeatOnce() {
  std::vector<std::string> lost;
  {
    // Under the claim lock: a job claimed meanwhile is not taken for lost.
    std::lock_guard<std::mutex> claim(claim_mu_);
    absl::StatusOr<std::set<std::string>> owned = leases_->Heartbeat(ttl_ns());
    if (!owned.ok()) {
      if (absl::IsFailedPrecondition(owned.status())) {
        {
          std::lock_guard<std::mutex> l(mu_);
          replaced_ = true;
        }
        Log()->error("{}", std::string(owned.status().message()));
        if (on_replaced_) on_replaced_(owned.status());
        return;
      }
      if (g_heartbeat_log.Allow()) {
        Log()->warn("cannot renew the lease of replica {}: {}", o_.replica_id,
                    std::string(owned.status().message()));
      }
      return;
    }
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = served_.begin(); it != served_.end();) {
      if (owned->count(*it)) {
        ++it;
      } else {
        lost.push_back(*it);
        it = served_.erase(it);
      }
    }
  }
  if (!lost.empty()) {
    Log()->warn("replica {} lost {} job(s) to other replicas (its lease had lapsed), e.g. {}",
                o_.replica_id, lost.size(), lost.front());
    if (on_lost_) on_lost_(lost);
  }
}

}  // namespace xpu::engine::replica
