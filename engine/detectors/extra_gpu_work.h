// extra_gpu_work — one rank runs GPU work that its peers, running the same
// program, do not (GEMMs on a second stream, a code path of its own): its
// step carries that work → algorithm.
//
// Peers: the ranks whose collectives in the window have the same shapes
// (kind, bytes, dtype, communicator size; not the communicator ids), i.e.
// the same role
// in the job's layout: the replicas of a data-parallel job, the ranks of one
// pipeline stage. A role held by one rank has no peers and is not judged.
// Per rank and traced compute signature (kind, name, GEMM shape, dtype):
// calls per complete step. The peers' figure per signature: the other
// rank's of two, else the median of the role's ranks (a signature a rank
// lacks counts 0). Extra time per step = sum over signatures of the calls
// beyond the peers' x the rank's mean duration of that signature (the
// role's when the rank timed none). Reported when it is at least
// extra_work.min_share of the rank's step time for
// extra_work.persist_windows consecutive windows. A slower GPU makes the
// same calls last longer (slow_gpu), not more calls.
//
// Thread-safety: none; called on the window tick.
#ifndef XPU_ENGINE_DETECTORS_EXTRA_GPU_WORK_H_
#define XPU_ENGINE_DETECTORS_EXTRA_GPU_WORK_H_

#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class ExtraGpuWorkDetector : public ViewDetector {
 public:
  ExtraGpuWorkDetector(std::shared_ptr<WindowViews> views,
                       std::shared_ptr<const DetectorConfig> config)
      : ViewDetector(std::move(views), std::move(config)) {}
  std::string_view name() const override { return "extra_gpu_work"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  Streaks streaks_;  // per rank: consecutive windows over
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_EXTRA_GPU_WORK_H_
