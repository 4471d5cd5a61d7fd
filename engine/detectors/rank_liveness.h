// rank_liveness — reports ranks that sent no records for longer than the
// silent timeout while their process has not exited. A silent rank is the
// first sign of a hang or a dead host; the hang detectors (later) refine it.
#ifndef XPU_ENGINE_DETECTORS_RANK_LIVENESS_H_
#define XPU_ENGINE_DETECTORS_RANK_LIVENESS_H_

#include "engine/window/detector.h"

namespace xpu::engine {

class RankLivenessDetector : public Detector {
 public:
  explicit RankLivenessDetector(uint64_t silent_after_ns) : silent_after_ns_(silent_after_ns) {}
  std::string_view name() const override { return "rank_liveness"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  uint64_t silent_after_ns_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_RANK_LIVENESS_H_
