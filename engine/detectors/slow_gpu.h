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
#ifndef XPU_ENGINE_DETECTORS_SLOW_GPU_H_
#define XPU_ENGINE_DETECTORS_SLOW_GPU_H_

#include <map>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class SlowGpuDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "slow_gpu"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  Streaks streaks_;  // per rank: consecutive windows low (two-rank rule)
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOW_GPU_H_
