// slow_dataloader — a rank whose DataLoader calls (XPU_OP_PY_DATALOADER)
// take a large share of its step time → algorithm (input pipeline).
//
// share = DataLoader host time / step time over the rank's complete steps in
// the window. A rank is reported when share >= dataloader.min_share and
// either it is beyond median + k·MAD of the ranks (one rank's loader is
// slow; the others wait for it in the next collective) or share >=
// dataloader.abs_share (every rank's loader is slow).
#ifndef XPU_ENGINE_DETECTORS_SLOW_DATALOADER_H_
#define XPU_ENGINE_DETECTORS_SLOW_DATALOADER_H_

#include "engine/window/window_view.h"

namespace xpu::engine {

class SlowDataloaderDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "slow_dataloader"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOW_DATALOADER_H_
