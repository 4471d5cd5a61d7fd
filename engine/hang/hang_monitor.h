// engine/hang/hang_monitor.h — the engine side of hang diagnosis.
//
// Suspicion (checked every poll_ms, default 500 ms, on the monitor's thread):
//  - a hook raised its hang-watch suspect flag (an op outstanding beyond its
//    threshold; forwarded by the daemon in ProcessCounters.progress);
//  - a rank exited, or fell silent (registry liveness), while other ranks
//    still have a collective outstanding for longer than exit_grace.
// Then, once per episode (re-run after rediagnose_ns while it lasts): Command
// kind "evidence" to every daemon of the job in parallel, with a deadline;
// the replies and the engine's own state (progress tables, open host
// intervals from the record rings, liveness) become RankEvidence; classify.h
// gives the verdict, stack_tree.h the merged stacks. The result is kept per
// job (Latest) and, while the episode lasts, offered as a Diagnosis (kind
// "hang_<class>") to the engine's window tick through HangDetector
// (hang_detector.h): the same tracker, store and alert routing as every
// other detector. The episode ends when no suspicion remains.
//
// CollectNow runs the same collection on demand (`xpu stacks`) for any job.
//
// Thread-safety: every public method is thread-safe. Lock order: the
// monitor's mutex is never held while taking a job's lock or waiting on
// daemons.
#ifndef XPU_ENGINE_HANG_HANG_MONITOR_H_
#define XPU_ENGINE_HANG_HANG_MONITOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/auth/caller.h"
#include "engine/hang/report.h"
#include "engine/state/command.h"
#include "engine/state/diagnosis.h"
#include "engine/state/registry.h"

namespace xpu::engine::hang {

// Sends the "evidence" command to a daemon (engine/state/command.h).
using EvidenceSender = CommandSender;

struct HangMonitorOptions {
  uint64_t poll_ms = 500;
  uint64_t evidence_deadline_ms = 20000;
  uint64_t exit_grace_ns = 3ull * 1000000000ull;
  uint64_t rediagnose_ns = 120ull * 1000000000ull;
  bool enabled = true;
};

// XPU_HANG_EVIDENCE_DEADLINE_MS, XPU_HANG_POLL_MS, XPU_HANG_DISABLE=1.
HangMonitorOptions HangMonitorOptionsFromEnv();

class HangMonitor {
 public:
  HangMonitor(Registry& registry, EvidenceSender send, HangMonitorOptions options);
  ~HangMonitor();
  HangMonitor(const HangMonitor&) = delete;
  HangMonitor& operator=(const HangMonitor&) = delete;

  void Start();
  void Stop();
  // One suspicion pass (the thread's body; tests call it directly).
  void Poll();

  std::optional<HangReport> Latest(const std::string& job) const;
  // `caller` goes with the evidence command to the daemons, which refuse
  // processes the caller may not act on.
  absl::StatusOr<HangReport> CollectNow(const std::string& job, uint64_t deadline_ms,
                                        const xpu::v1::CommandCaller& caller = auth::EngineCaller());
  // The diagnosis of the job's ongoing hang episode, if any.
  std::optional<Diagnosis> ActiveDiagnosis(const std::string& job) const;
  // Called with every new hang diagnosis, right away (logging, tests).
  void SetListener(std::function<void(const Diagnosis&)> listener);

  // Converts a report into the engine's Diagnosis (public for tests).
  static Diagnosis ToDiagnosis(const HangReport& r);

 private:
  struct Suspicion {
    std::string trigger;
    uint64_t stall_since_ns = 0;
  };
  std::optional<Suspicion> Suspect(JobState& job, uint64_t now);
  HangReport Diagnose(const std::string& job, uint64_t deadline_ms, bool on_demand,
                      const xpu::v1::CommandCaller& caller);

  Registry& registry_;
  EvidenceSender send_;
  const HangMonitorOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, HangReport> latest_;        // guarded by mu_
  std::map<std::string, uint64_t> episode_start_;   // job -> engine time of its last diagnosis
  std::map<std::string, Diagnosis> active_;         // guarded by mu_
  std::function<void(const Diagnosis&)> listener_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_HANG_MONITOR_H_
