// registry — who is out there: jobs (with their JobState), daemons, and the
// jobs known only from history (loaded from the store at start-up).
//
// Liveness: a daemon with no message for silent_after is "silent"; a rank
// with no new records for silent_after is "silent"; a process the daemon
// reported as exited is "exited" (final). UpdateLiveness() applies the rules
// at the injected clock's "now", so tests drive time explicitly.
//
// Thread-safety: all methods are thread-safe. Lock order: registry mutex
// before a job's mutex; the registry never calls out while holding its own
// lock except into JobState under that order.
#ifndef XPU_ENGINE_STATE_REGISTRY_H_
#define XPU_ENGINE_STATE_REGISTRY_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/state/job_state.h"

namespace xpu::engine {

// Nanoseconds since the Unix epoch (CLOCK_REALTIME in production).
using Clock = std::function<uint64_t()>;
Clock RealtimeClock();

struct DaemonState {
  std::string daemon_id;
  std::string host;
  std::string version;
  bool connected = false;
  bool silent = false;
  uint64_t first_seen_ns = 0;
  uint64_t last_seen_ns = 0;
  uint64_t batches = 0;
  uint64_t records = 0;
  uint64_t records_dropped = 0;  // cumulative, as reported by the daemon
};

// What Jobs/Status report and the store persists per job.
struct JobSummary {
  std::string job;
  std::string job_name;
  uint32_t ranks = 0;
  uint32_t ranks_alive = 0;
  uint64_t first_seen_ns = 0;
  uint64_t last_seen_ns = 0;
  uint64_t records = 0;
  std::string state;      // running / silent / finished
  uint64_t dropped = 0;   // every loss of its processes
  int64_t owner_uid = -1; // uid of its processes; -1 unknown
  uint64_t analysed_until_ns = 0;  // JobState::analysed_until_ns
  uint64_t records_late = 0;       // JobState::late_records
  std::array<uint64_t, kLossReasons> lost{};  // `dropped` by reason (live jobs only)
};

class Registry {
 public:
  Registry(Clock clock, uint64_t silent_after_ns, size_t ring_capacity);

  uint64_t Now() const { return clock_(); }
  uint64_t silent_after_ns() const { return silent_after_ns_; }

  std::shared_ptr<JobState> GetOrCreateJob(const std::string& job, const std::string& job_name);
  // The same, but creates no job beyond `max_jobs` live ones (returns null).
  std::shared_ptr<JobState> GetOrCreateJob(const std::string& job, const std::string& job_name,
                                           size_t max_jobs);
  // Called (under the registry's lock, once) for each job this engine
  // creates: what the history knows of it from before a restart.
  void SetJobSeeder(std::function<JobSeed(const std::string& job)> seeder);
  // uid owning `job`, live or historical; nullopt for a job never seen.
  std::optional<int64_t> JobOwner(const std::string& job) const;
  size_t JobCount() const;
  std::shared_ptr<JobState> FindJob(const std::string& job) const;
  // Forgets a live job that another engine replica serves now (neither kept
  // in memory nor listed as finished); true if it was here.
  bool DropJob(const std::string& job);
  std::vector<std::shared_ptr<JobState>> Jobs() const;

  void DaemonConnected(const std::string& id, const std::string& host, const std::string& version);
  void DaemonDisconnected(const std::string& id);
  // A message arrived; batches/records are increments, dropped is cumulative.
  void DaemonSeen(const std::string& id, uint64_t batches, uint64_t records,
                  uint64_t records_dropped_cumulative);
  std::vector<DaemonState> Daemons() const;
  size_t DaemonsConnected() const;

  // Jobs from earlier runs of the engine (store); live jobs of the same name
  // take precedence.
  void AddHistoricalJob(const JobSummary& s);
  // Live jobs plus (when include_finished) historical ones, sorted by
  // first_seen, newest last. Without include_finished, finished jobs are left
  // out. Never waits for a job's window analysis (which holds the job for
  // seconds at 100k ranks): a job busy now is answered with its summary of
  // the latest UpdateLiveness, i.e. the start of that analysis.
  std::vector<JobSummary> JobSummaries(bool include_finished) const;

  // Applies the liveness rules at Now().
  void UpdateLiveness();
  // Moves jobs finished (every process exited) and silent for longer than
  // retain_ns out of memory into the history list; returns their names.
  std::vector<std::string> RetireFinishedJobs(uint64_t retain_ns);

 private:
  Clock clock_;
  uint64_t silent_after_ns_;
  size_t ring_capacity_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<JobState>> jobs_;
  std::map<std::string, DaemonState> daemons_;
  std::map<std::string, JobSummary> history_;
  std::function<JobSeed(const std::string& job)> seeder_;
  std::map<std::string, JobSummary> summaries_;  // live jobs at the latest UpdateLiveness
  bool CachedSummary(const std::string& job, JobSummary* out) const;
};

JobSummary Summarize(const JobState& job);  // caller holds job.mu()

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_REGISTRY_H_
