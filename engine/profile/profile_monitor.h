// engine/profile/profile_monitor.h — differential localization with a short
// profiling window (PerfTracker, "Online Performance Troubleshooting for
// Large-scale Model Training": detect, profile briefly, summarize on the
// workers, localize centrally).
//
// Triggers:
//  - automatic: the window tick reports a throughput_regression diagnosis
//    for a job (OnThroughputRegression); at most one window per job per
//    `min_interval_ns` (XPU_PROFILE_MIN_INTERVAL_S, default 600 s), never
//    two at once, off with XPU_PROFILE_AUTO=0;
//  - on demand: `xpu profile --job J [--seconds S]` (RunNow, ProfileQuery).
// A window: Command kind "profile" to every daemon holding a rank of the job,
// in parallel (window `window_ms`, XPU_PROFILE_SECONDS, default 15 s); each
// daemon has its hooks run the CUPTI window and answers with the behaviour
// patterns of its processes (daemon/profile_window.h). Then the distances
// and the abnormal function executions (analysis/behavior_distance.h), and
// the diagnoses (differential_localization.h). Ranks that did not
// run a window (another CUPTI client, no CUPTI, no answer) are listed with
// the reason and left out of the comparison.
//
// The latest report per job is kept; its diagnoses are offered to the window
// tick for `report_ttl_ns` (XPU_PROFILE_REPORT_TTL_S, default 600 s).
//
// Thread-safety: every public method is thread-safe. Automatic windows run
// on threads of their own (joined by Stop); RunNow blocks its caller. The
// monitor's mutex is never held while taking a job's lock or waiting on
// daemons.
#ifndef XPU_ENGINE_PROFILE_PROFILE_MONITOR_H_
#define XPU_ENGINE_PROFILE_PROFILE_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/analysis/behavior_distance.h"
#include "engine/profile/profile_report.h"
#include "engine/auth/caller.h"
#include "engine/state/command.h"
#include "engine/state/diagnosis.h"
#include "engine/state/registry.h"
#include "xpu/ring.h"

namespace xpu::engine::profile {

struct ProfileMonitorOptions {
  bool auto_trigger = true;                           // XPU_PROFILE_AUTO
  uint32_t window_ms = 15000;                         // XPU_PROFILE_SECONDS
  uint64_t min_interval_ns = 600ull * 1000000000ull;  // XPU_PROFILE_MIN_INTERVAL_S
  uint64_t report_ttl_ns = 600ull * 1000000000ull;    // XPU_PROFILE_REPORT_TTL_S
  uint64_t grace_ms = 30000;  // waiting beyond the window (XPU_PROFILE_GRACE_MS)
  uint32_t max_records = 0;   // XPU_PROFILE_MAX_RECORDS per process, 0 = hook default
  // XPU_PROFILE_K, XPU_PROFILE_DELTA, XPU_PROFILE_MIN_BETA, XPU_PROFILE_MIN_CHANGE
  analysis::LocalizationOptions localization;
};

// The variables above; bad values keep the default.
ProfileMonitorOptions ProfileMonitorOptionsFromEnv();

class ProfileMonitor {
 public:
  ProfileMonitor(Registry& registry, CommandSender send, ProfileMonitorOptions options);
  ~ProfileMonitor();
  ProfileMonitor(const ProfileMonitor&) = delete;
  ProfileMonitor& operator=(const ProfileMonitor&) = delete;

  // Window tick: the job's throughput regressed. Starts an automatic window
  // in the background unless disabled, rate-limited or one is running.
  // Returns true when it started one.
  bool OnThroughputRegression(const std::string& job, uint64_t now_ns);
  // Runs a window now and waits for it. NOT_FOUND for a job that is not
  // live, FAILED_PRECONDITION while another window of the job runs.
  // `caller` goes with the command to the daemons, which refuse processes
  // the caller may not act on.
  absl::StatusOr<ProfileReport> RunNow(const std::string& job, uint32_t seconds,
                                       uint64_t deadline_ms,
                                       const xpu::v1::CommandCaller& caller = auth::EngineCaller());
  std::optional<ProfileReport> Latest(const std::string& job) const;
  // The latest report's diagnoses while it is fresh, stamped `now_ns`.
  std::vector<Diagnosis> ActiveDiagnoses(const std::string& job, uint64_t now_ns) const;
  // Joins the automatic windows in flight (the engine is shutting down).
  void Stop();
  const ProfileMonitorOptions& options() const { return options_; }

  // Turns the daemons' replies into a report (pure; tests). `known` lists
  // every process the engine knows for the job (rank, host, pid), so that
  // ranks whose daemon did not answer appear as "no_reply".
  struct KnownRank {
    int32_t rank = -1;
    std::string host;
    int32_t pid = 0;
  };
  static ProfileReport BuildReport(const std::string& job, const std::string& trigger,
                                   uint32_t window_ms, const std::vector<KnownRank>& known,
                                   const std::vector<xpu::v1::ProfileReply>& replies,
                                   const analysis::LocalizationOptions& options);

 private:
  ProfileReport Collect(const std::string& job, const std::string& trigger, uint32_t window_ms,
                        uint64_t deadline_ms, const xpu::v1::CommandCaller& caller);
  void Store(ProfileReport report);

  Registry& registry_;
  CommandSender send_;
  const ProfileMonitorOptions options_;

  mutable std::mutex mu_;
  bool stopping_ = false;                         // guarded by mu_
  std::map<std::string, bool> running_;           // job -> a window is in flight
  std::map<std::string, uint64_t> last_auto_ns_;  // job -> start of its last automatic window
  std::map<std::string, ProfileReport> latest_;   // guarded by mu_
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::list<Worker> workers_;  // guarded by mu_
};

}  // namespace xpu::engine::profile

#endif  // XPU_ENGINE_PROFILE_PROFILE_MONITOR_H_
