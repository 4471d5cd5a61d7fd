// steps — training-step boundaries and throughput change detection.
//
// Boundaries come from step markers (XPU_OP_STEP records; the start of each
// marker, one per distinct step id) when the rank has them; otherwise from
// the periodicity of the rank's collective sequence: the smallest period P
// such that the sequence of collective signatures repeats (>= 90 % of
// positions equal to the one P later, at least 3 periods seen); a boundary is
// the start of every P-th collective, phased on the first occurrence of the
// rarest signature of the period (in a data-parallel step, typically the
// once-per-step optimizer collectives).
//
// Throughput change (PerfTracker): degraded when the mean of the last N step
// times exceeds the recent best by more than `threshold` (5 %). "Recent best"
// is the smallest mean of N consecutive steps in the history — a rolling
// mean rather than the single shortest step, so one lucky step does not set
// the bar.
#ifndef XPU_COMMON_ANALYSIS_STEPS_H_
#define XPU_COMMON_ANALYSIS_STEPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/analysis/trace.h"

namespace xpu::analysis {

enum class StepSource { kNone, kMarkers, kCollectivePeriod };
const char* StepSourceName(StepSource s);

struct Steps {
  StepSource source = StepSource::kNone;
  std::vector<uint64_t> boundaries_ns;  // ascending; step i = [b[i], b[i+1])
  size_t period = 0;                    // collectives per step (kCollectivePeriod)
  std::vector<double> DurationsS() const;
};
Steps FindSteps(const RankTrace& t);
// Smallest period of `symbols` as described above; 0 when none.
size_t SequencePeriod(const std::vector<uint64_t>& symbols, double min_match = 0.9,
                      size_t min_periods = 3);

// PerfTracker's rule, made robust to noisy steps: degraded when the mean of
// the last N steps exceeds the recent best N-step mean (10th percentile of
// the N-step means) by more than `threshold` and by more than noise_z x the
// noise of an N-step mean; noise_z <= 0 leaves the noise out. The noise is
// the larger of the standard error from consecutive-step differences and,
// with at least 5 earlier disjoint N-step means, their spread (IQR / 1.349): a
// job whose level wanders is judged against its own wandering.
struct ThroughputChange {
  bool enough_data = false;
  bool degraded = false;
  double recent_mean_s = 0;  // mean of the last N
  double best_mean_s = 0;    // 10th percentile of the means of N consecutive steps
  double change = 0;         // recent / best - 1
  double noise_s = 0;        // standard error of an N-step mean
};
ThroughputChange DetectThroughputChange(const std::vector<double>& step_s, size_t n,
                                        double threshold = 0.05, double noise_z = 3.0);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_STEPS_H_
