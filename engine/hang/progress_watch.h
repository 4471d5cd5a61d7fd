// engine/hang/progress_watch.h — suspicion of a hang from a job's own
// progress, whatever its ranks are doing: a process whose records show no
// progress (no op completed, no step marker, no host API done:
// job_state.h IsProgressRecord) for longer than
//     threshold (below)
// is stalled. The period is the job's step time (step markers, else the
// period of its collective sequence, from its lowest rank's recent
// records), or, when longer, the 90th percentile of the gaps between its
// processes' progress on their own clock (consecutive progress records): a
// job whose steps hold long quiet phases is judged against them. To that
// comes the 90th percentile of the gaps between the arrivals of its
// progress, how late progress can reach the engine (a daemon's flushes, a
// busy host):
//     threshold = max(floor, multiple x period) + arrival gap
// (judged against the arrival gaps alone, a GPU-bound one-rank job was
// suspected only after 4 x 3 to 5 s of batches, 12 to 20 s). The floor
// keeps short pauses (a slow batch) from raising a suspicion; checkpoints
// and evaluations are told apart by the verdict (classify.h: busy-wait),
// not by the threshold.
//
// A process's silence is measured as far as the engine has seen it
// (ProcessState::SeenUntilNs): up to the last batch its daemon sent about
// it, plus twice the median gap between its batches, while that stream
// is open. Batches waiting unread in an ingest that fell behind are no
// silence of the job; once the stream is gone, all the time counts.
//
// This covers what the hook's per-op watch cannot see: a one-process job,
// or one whose every rank is stuck outside collectives (Python, data
// loading, I/O, stopped, a kernel that never ends): no collective waits,
// nothing is overdue in the hook, only progress stops. A process that has
// not made progress yet (start-up) is not judged; when some processes of
// the job exited, the rest get `end_grace` more (a job tearing down).
//
// Thread-safety: none; used by the hang monitor's poll thread only. Check
// runs with the job's lock held.
#ifndef XPU_ENGINE_HANG_PROGRESS_WATCH_H_
#define XPU_ENGINE_HANG_PROGRESS_WATCH_H_

#include <cstdint>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/state/job_state.h"

namespace xpu::engine::hang {

struct ProgressWatchOptions {
  uint64_t floor_ns = 6ull * 1000000000ull;  // XPU_HANG_PROGRESS_FLOOR_S; 0: off
  double multiple = 4.0;                     // XPU_HANG_PROGRESS_MULTIPLE
  uint64_t end_grace_ns = 30ull * 1000000000ull;
  uint64_t period_refresh_ns = 10ull * 1000000000ull;
};

struct ProgressStall {
  std::vector<int32_t> ranks;    // stalled ranks (-1: a rank-less process)
  uint64_t since_ns = 0;         // engine clock: the oldest last progress among them
  uint64_t threshold_ns = 0;
  uint64_t period_ns = 0;        // the job's period the threshold came from
  std::string period_source;     // "step markers", "collective period", "progress gaps", "none"
  std::string trigger;           // one line for the report
};

class ProgressWatch {
 public:
  explicit ProgressWatch(ProgressWatchOptions options) : options_(options) {}
  bool enabled() const { return options_.floor_ns > 0; }

  // Caller holds job.mu(). Updates the job's pace and returns the stall, if
  // any process is stalled at `now_ns` (engine clock).
  std::optional<ProgressStall> Check(const JobState& job, uint64_t now_ns);
  // The job's current threshold (floor until known).
  uint64_t ThresholdNs(const std::string& job) const;
  // The job is under a hang suspicion now: the gap each of its processes is
  // in is a stall, not a sample of its pace, and is left out of the gap
  // figure (one hang must not stretch the threshold for the next one).
  void MarkStalled(const std::string& job);
  // Forgets jobs the engine no longer has.
  void Retain(const std::vector<std::string>& jobs);

  // The step time of a process from its recent records (markers, else the
  // collective period): median step, 0 when unknown. Caller holds the job's
  // lock. Public for tests.
  static uint64_t StepPeriodNs(const ProcessState& p, std::string* source);

 private:
  // The last 64 gaps, in µs, and their 90th percentile, figured when a gap
  // comes: the watch reads it for every process at every poll (500 ms), and
  // a 100k-rank job holds 200k of these.
  class RecentGaps {
   public:
    void Add(uint64_t ns);
    void Clear() { n_ = next_ = p90_us_ = 0; }
    uint64_t P90Ns() const { return uint64_t{p90_us_} * 1000ull; }

   private:
    std::array<uint32_t, 64> us_{};
    uint32_t n_ = 0, next_ = 0, p90_us_ = 0;
  };
  struct ProcessPace {
    uint64_t last_progress_ns = 0;
    RecentGaps gaps;      // between consecutive progress arrivals
    RecentGaps job_gaps;  // largest progress gap (host clock) per arrival
    bool in_stall = false;      // the current gap is a stall (MarkStalled)
    bool stepped = false;       // gaps from before the first step marker dropped
  };
  struct JobPace {
    uint64_t step_period_ns = 0;
    std::string step_source = "none";
    uint64_t refreshed_ns = 0;
    uint64_t threshold_ns = 0;
    std::map<std::string, ProcessPace> procs;
  };
  void RefreshPeriod(const JobState& job, uint64_t now_ns, JobPace* pace) const;

  const ProgressWatchOptions options_;
  std::map<std::string, JobPace> jobs_;
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_PROGRESS_WATCH_H_
