// slow_gpu — a rank whose GEMM TFLOPS is far below its peers on the same
// shapes (XPUTimer §5.2.1: underclocked or faulty GPU) → operations.
//
// Per GEMM shape, each rank's TFLOPS over the window (timed GEMMs that do not
// overlap a collective, analysis/gemm.h) is compared with the median of the
// ranks: a rank is low on a shape when it is more than min_drop below the
// median and beyond median - k·MAD. A rank low on at least half of the shapes
// it ran (and on one at least) is reported, one diagnosis per rank. With two
// ranks (no median to speak of) the slower one is low on a shape when it is
// min_drop below the other, and it is reported once that held in two
// consecutive windows (one window of a sync-heavy or launch-bound job can
// time a few GEMMs of one rank slow).
//
// Without peers that can tell (one rank, or every rank slowed alike), each
// rank is also compared with its own first windows (history.baseline_windows
// windows in which it ran the shape; shapes that would take under
// unoptimized_gemm.min_ideal_us at that rate are latency-bound and left
// out): a shape is low when the window's
// median call is min_drop below the first windows' median and the calls are
// slower as a whole (the window's upper quartile under the first windows'
// lower quartile); a rank low on at least half of those shapes in two
// consecutive windows is reported, with its own first windows as the
// reference.
//
// A GPU time-sliced with another process (or throttling on and off) slows
// some calls many times and leaves the rest at full rate: the median call
// barely moves, so the rules above miss it. Each rank's calls of a shape
// are also compared with its typical call (the window's fast quartile, or
// its own first windows' median where faster): calls more than
// slow_gpu.intermittent_factor times slower lose time; a rank that lost
// slow_gpu.intermittent_share of its timed GEMM time that way, in two
// consecutive windows, is reported. Only calls issued behind a queue of at
// least slow_gpu.intermittent_min_queue_us are judged (with a shallow
// queue, a host delay between a call's timing event and its launch
// stretches the call: the host, not the device); calls that overlap the
// rank's own GPU work on another stream are left out (the job's
// concurrency), as are latency-bound shapes and ranks that wait for a peer.
#ifndef XPU_ENGINE_DETECTORS_SLOW_GPU_H_
#define XPU_ENGINE_DETECTORS_SLOW_GPU_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/detectors/streaks.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class SlowGpuDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "slow_gpu"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  // A rank's shapes compared, those found low, and the lowest.
  struct RankScore {
    int shapes = 0, low = 0;
    double worst_ratio = 1;
    std::string worst_shape;
    double worst_tflops = 0, worst_median = 0;
    bool two_ranks = false;  // compared with the only other rank, not a peer median
    bool own = false;        // compared with its own first windows
    // Intermittently slow calls (time-sliced GPU): calls counted, those
    // slower than the factor, seconds lost in them, timed GEMM seconds.
    bool intermittent = false;
    uint64_t calls = 0, slow_calls = 0;
    double lost_s = 0, gemm_s = 0;
    void Low(double ratio, const std::string& shape, double tflops, double reference);
  };
  // (shape, rank) -> the window's per-call TFLOPS
  using CallMap = std::map<std::pair<std::string, int32_t>, std::vector<double>>;
  // (shape, rank) -> per call, whether it can be judged for intermittent
  // slowness: alone on the device as far as the rank's own work goes, and
  // launched behind a queue deep enough that a host delay between its
  // timing event and its launch cannot stretch it
  using JudgedMap = std::map<std::pair<std::string, int32_t>, std::vector<uint8_t>>;
  std::map<int32_t, RankScore> AgainstOwnFirstWindows(const JobState& job, const WindowView& v,
                                                      const CallMap& calls,
                                                      const std::map<std::string, double>& flops,
                                                      double min_drop);
  static std::string Evidence(int32_t rank, const std::vector<std::string>& hosts,
                              const RankScore& s, double k, double min_drop);
  std::string IntermittentEvidence(int32_t rank, const std::vector<std::string>& hosts,
                                   const RankScore& s, const WindowView& v) const;
  std::map<int32_t, RankScore> IntermittentCalls(const JobState& job, const WindowView& v,
                                                 const CallMap& calls,
                                                 const JudgedMap& judged,
                                                 const std::map<std::string, double>& flops);

  // A rank's GEMMs of one shape in its own first windows: the sums of the
  // windows' median and lower-quartile TFLOPS.
  struct OwnGemm {
    int windows = 0;
    double median_sum = 0, q25_sum = 0;
  };
  using OwnKey = std::pair<int32_t, size_t>;  // rank, hash of the shape's key
  Streaks streaks_;  // per rank: consecutive windows low (two-rank and own rules)
  std::map<std::string, absl::flat_hash_map<OwnKey, OwnGemm>> own_;  // job -> first windows
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOW_GPU_H_
