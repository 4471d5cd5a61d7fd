// kernel_issue_stall — intra-step CPU work that starves the GPU (XPUTimer
// §5.2.2): issue latencies (GPU start - CPU launch) become much SHORTER,
// because the GPU's queue runs dry while the host is busy, and their CDF
// rises steeply near zero → algorithm.
//
// Per rank and kernel family (communication, compute) over the window:
//  * vs peers: KS distance to the pooled other ranks >= issue_stall.ks and
//    median below shift_ratio × the peers' median (one rank stalls: GC);
//  * vs history: the same test against the rank's own baseline (first
//    windows of the job) (every rank stalls from some point on: a new
//    synchronize in the model), then against the issue-latency histogram of
//    previous runs of the job name on the same GPU model (engine/history/;
//    every rank stalls from the first step on);
//  * steep without history: more than steep_fraction of the samples below
//    floor_us, or a median below step_fraction of the step time (the host
//    never gets ahead of the GPU), while the rank's synchronizations are
//    costly (below) or it collects garbage for gc_alone_share of its steps;
//  * synchronization alone (no stall in the issue latencies needed: syncs
//    inside a GPU-bound forward leave most latencies long): the rank's
//    synchronizations are costly, or it makes more than sync_growth x its
//    peers' rate and they cost it sync_peer_cost_share of the step more
//    than the peers' cost them.
// Cost of synchronizations (analysis::ComputeSyncIdle): the GPU idle time
// after sync returns, while the host refills an empty queue, summed over the
// steps; costly from issue_stall.sync_cost_share of the step time. How many
// syncs a step makes is no criterion by itself: a healthy loop's timing,
// loss read-out and FSDP's event waits cost ~0.1 % of the step.
// Ranks whose DataLoader takes >= dataloader.min_share of the step are left
// to slow_dataloader (an inter-step delay, not an intra-step stall). Ranks
// whose timed collectives take issue_stall.wait_share of the step more than
// the least-waiting rank's wait for a slower peer (slow GPU or stalled host
// elsewhere): their issue latencies are not judged. A rank's stall is
// reported once the same cause lasted issue_stall.persist_windows
// consecutive windows (the start-up window's synchronizations are not a
// stall).
// Attribution to coinciding host events on the rank: Python GC
// (XPU_OP_PY_GC, time share >= min_gc_share of the steps), synchronization
// (XPU_OP_SYNC_*, XPU_OP_PY_SYNC: costly, or more than the peers, or, once
// the rank's first windows gave its own rate, more than sync_growth x that
// rate), else "unattributed". One diagnosis per cause, subject = the
// cause.
#ifndef XPU_ENGINE_DETECTORS_KERNEL_ISSUE_STALL_H_
#define XPU_ENGINE_DETECTORS_KERNEL_ISSUE_STALL_H_

#include <array>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/detectors/streaks.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class KernelIssueStallDetector : public ViewDetector {
 public:
  // `history` may be null: no previous runs.
  KernelIssueStallDetector(std::shared_ptr<WindowViews> views,
                           std::shared_ptr<const DetectorConfig> config,
                           std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "kernel_issue_stall"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  // The rank's issue latencies in its first windows, sorted: at most
  // kBaselineQuantiles evenly spaced quantiles of each window's (within
  // about 1/kBaselineQuantiles of them in the KS sense, far below
  // issue_stall.ks), as floats: a 100k-rank job keeps 100k of these.
  struct Baseline {
    std::vector<float> samples_us;
    int windows = 0;
  };
  static constexpr size_t kBaselineQuantiles = 256;
  // What the detector keeps of a rank between windows, per kernel family
  // (communication, compute).
  struct RankMemory {
    std::array<Baseline, 2> base;  // the rank's first windows
    // The previous window's issue latencies, which top up a window with
    // fewer than issue_stall.min_samples (a job of long steps: a few
    // kernels with a valid issue latency per step).
    std::array<std::vector<float>, 2> previous;
  };
  std::shared_ptr<history::HistoryCache> history_;
  // job -> rank -> what is kept of it
  std::map<std::string, std::unordered_map<int32_t, RankMemory>> ranks_;
  Streaks streaks_;  // "rank/cause" -> consecutive windows with that stall
  struct SyncBaseline {
    double per_step_sum = 0;  // synchronizations per step, summed over the windows
    int windows = 0;
  };
  // job -> rank -> its synchronization rate in its first windows
  std::map<std::string, std::map<int32_t, SyncBaseline>> sync_base_;
  class WindowPass;  // one window's judgement, step by step (kernel_issue_stall.cc)
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_KERNEL_ISSUE_STALL_H_
