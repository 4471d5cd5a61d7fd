// engine/hang/hang_monitor.h — the engine side of hang diagnosis.
//
// Suspicion (checked every poll_ms, default 500 ms, on the monitor's thread;
// longer when a pass holds the jobs' locks long, as in a job of 100k ranks:
// PollWait):
//  - a process made no progress for longer than the job's own threshold
//    (progress_watch.h: max(floor, multiple x the job's step period)): a
//    one-process job, or every rank stuck outside collectives, is a hang too;
//  - a hook raised its hang-watch suspect flag (an op outstanding beyond its
//    threshold; forwarded by the daemon in ProcessCounters.progress);
//  - a rank exited, or fell silent (registry liveness), while other ranks
//    still have a collective outstanding for longer than exit_grace.
// The earliest stall of these is the episode's start.
//
// Then, once per episode (re-run after rediagnose_ns while it lasts), two
// passes of Command kind "evidence" to every daemon of the job in parallel:
//  1. quick (Command.evidence_mode "quick", deadline quick_deadline_ms):
//     process and thread states, Python stacks, progress tables, ring
//     counters, no debugger. Its verdict is published at once: the culprit
//     of a stopped rank, a rank stuck in Python, a mismatch or a rank that
//     never issued the collective is named within seconds of the suspicion.
//  2. full (deadline evidence_deadline_ms, on a thread of its own): native
//     stacks from the debugger on the processes that need it (with cuda-gdb
//     only those whose kernels are stuck, which also read the NCCL kernels'
//     ring counters); merged with the quick pass's Python stacks, it refines
//     the verdict (intra-kernel ring localization, native frames).
// The replies and the engine's own state (progress tables, open host
// intervals from the record rings, liveness, recent progress, the
// communicators' completed collectives) become RankEvidence
// (rank_evidence.h); classify.h gives the verdict, stack_tree.h the merged
// stacks. The result is kept per job (Latest) and, while the episode lasts,
// offered as a Diagnosis (kind "hang_<class>") to the engine's window tick
// through HangDetector (hang_detector.h): the same tracker, store and alert
// routing as every other detector. A verdict of no recognised pattern is
// kept as the report only. The episode ends when no suspicion remains.
//
// CollectNow runs both passes on demand (`xpu stacks`) for any job.
//
// Thread-safety: every public method is thread-safe. Lock order: the
// monitor's mutex is never held while taking a job's lock or waiting on
// daemons. The progress watch is used by the poll thread only.
#ifndef XPU_ENGINE_HANG_HANG_MONITOR_H_
#define XPU_ENGINE_HANG_HANG_MONITOR_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/auth/caller.h"
#include "engine/hang/progress_watch.h"
#include "engine/hang/rank_evidence.h"
#include "engine/hang/report.h"
#include "engine/state/command.h"
#include "engine/state/diagnosis.h"
#include "engine/state/registry.h"

namespace xpu::engine::hang {

// Sends the "evidence" command to a daemon (engine/state/command.h).
using EvidenceSender = CommandSender;

// The suspicion passes hold the jobs' locks for at most 1/kPollCostShare of
// the monitor's time, up to a wait of kMaxPollWaitMs: the wait after a poll
// whose passes held the locks for `pass_ns` (waiting for a lock is not
// counted) is poll_ms, or kPollCostShare x pass_ns when longer, at most
// kMaxPollWaitMs (the hooks' hang floor is 10 s by default).
inline constexpr uint64_t kPollCostShare = 20;
inline constexpr uint64_t kMaxPollWaitMs = 3000;
inline std::chrono::nanoseconds PollWait(uint64_t poll_ms, uint64_t pass_ns) {
  return std::chrono::nanoseconds(std::clamp<uint64_t>(kPollCostShare * pass_ns,
                                                       poll_ms * 1000000ull,
                                                       std::max(poll_ms, kMaxPollWaitMs) * 1000000ull));
}

struct HangMonitorOptions {
  uint64_t poll_ms = 500;
  uint64_t evidence_deadline_ms = 20000;
  uint64_t quick_deadline_ms = 3000;
  uint64_t exit_grace_ns = 3ull * 1000000000ull;
  uint64_t rediagnose_ns = 120ull * 1000000000ull;
  // A rank whose last progress record arrived this recently still works
  // (daemons flush at least every second; a stuck rank's last progress is
  // as old as the stall, at least the hook's 5 s floor by the time of a
  // verdict): evidence for busy-wait, not for a culprit.
  uint64_t progress_fresh_ns = 2500ull * 1000000ull;
  bool enabled = true;
  ProgressWatchOptions progress;
};

// XPU_HANG_EVIDENCE_DEADLINE_MS, XPU_HANG_QUICK_DEADLINE_MS,
// XPU_HANG_POLL_MS, XPU_HANG_DISABLE=1, XPU_HANG_PROGRESS_FLOOR_S (0: no
// progress suspicion), XPU_HANG_PROGRESS_MULTIPLE.
HangMonitorOptions HangMonitorOptionsFromEnv();

class HangMonitor {
 public:
  HangMonitor(Registry& registry, EvidenceSender send, HangMonitorOptions options);
  ~HangMonitor();
  HangMonitor(const HangMonitor&) = delete;
  HangMonitor& operator=(const HangMonitor&) = delete;

  void Start();
  // Stops the poll thread and joins the refinements in flight.
  void Stop();
  // One suspicion pass (the thread's body; tests call it directly). The
  // refinement of a new episode runs on a thread of its own; WaitIdle
  // waits for those.
  void Poll();
  void WaitIdle();

  std::optional<HangReport> Latest(const std::string& job) const;
  // `caller` goes with the evidence command to the daemons, which refuse
  // processes the caller may not act on.
  absl::StatusOr<HangReport> CollectNow(const std::string& job, uint64_t deadline_ms,
                                        const xpu::v1::CommandCaller& caller = auth::EngineCaller());
  // The diagnosis of the job's ongoing hang episode, if any.
  std::optional<Diagnosis> ActiveDiagnosis(const std::string& job) const;
  // Called with every new or changed hang diagnosis, right away (logging,
  // tests).
  void SetListener(std::function<void(const Diagnosis&)> listener);

  // Converts a report into the engine's Diagnosis (public for tests).
  static Diagnosis ToDiagnosis(const HangReport& r);

 private:
  struct Suspicion {
    std::string trigger;
    uint64_t stall_since_ns = 0;
    uint64_t progress_records = 0;  // JobState::progress_records() when suspected
  };
  // `held_ns` gets how long the pass held the job's lock.
  std::optional<Suspicion> Suspect(JobState& job, uint64_t now, uint64_t* held_ns);
  // One pass: snapshot, evidence of `mode`, verdict. `earlier` (may be
  // null) completes the evidence; `evidence_out` (may be null) gets it.
  HangReport Diagnose(const std::string& job, uint64_t deadline_ms, bool on_demand,
                      const std::string& mode, const EvidenceByProcess* earlier,
                      EvidenceByProcess* evidence_out, const xpu::v1::CommandCaller& caller);
  // Keeps `r` as the job's latest report and, while the episode started at
  // `episode` lasts, its diagnosis as the active one.
  // True when `quick` says again what the latest, refined report says (the
  // caller knows it is the same episode: no recovery in between).
  bool RepeatsRefined(const HangReport& quick) const;
  void Publish(const HangReport& r, uint64_t episode);
  void Refine(std::string job, HangReport quick, EvidenceByProcess evidence, uint64_t episode,
              uint64_t progress_records);
  // Whether `r` names a fault although records of progress reached the job
  // after `progress_records` (the suspicion's count): a verdict formed while
  // the job moves, from evidence of ranks read at different moments (a
  // checkpoint that just ended), is not published. Logs it.
  bool MovedMeanwhile(const HangReport& r, uint64_t progress_records) const;

  Registry& registry_;
  EvidenceSender send_;
  const HangMonitorOptions options_;
  ProgressWatch progress_;  // poll thread only

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, HangReport> latest_;        // guarded by mu_
  std::map<std::string, uint64_t> episode_start_;   // job -> engine time of its last diagnosis
  std::set<std::string> busy_refined_;  // jobs whose busy-wait episode had its full pass
  std::map<std::string, Diagnosis> active_;         // guarded by mu_
  std::function<void(const Diagnosis&)> listener_;  // guarded by mu_
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::list<Worker> workers_;  // refinements, guarded by mu_
  std::thread thread_;
  // The time of the last Poll's suspicion passes (Suspect, every job),
  // which sets the wait before the next (hang::PollWait).
  std::atomic<uint64_t> pass_ns_{0};
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_HANG_MONITOR_H_
