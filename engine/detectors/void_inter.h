// void_inter — inter-step CPU work leaves the GPU idle between steps
// (XPUTimer §5.2.2, V_inter = T_inter / T_step, analysis/void_time.h)
// → algorithm.
//
// A rank is reported when V_inter >= void_inter.threshold (per backbone:
// void_inter.threshold@JOB_NAME) or exceeds by void_inter.history_delta
// the rank's baseline (first windows of the job) or the median V_inter of
// previous runs of the job name on the same GPU model (engine/history/; a
// job slow from its first step has no clean baseline). When DataLoader calls
// account for more than half of T_inter, slow_dataloader is the more
// specific diagnosis and this one stays silent. A rank is reported once it
// was over in void_inter.persist_windows consecutive windows (a run's first
// window, with its start-up steps, sits above the history of whole runs).
#ifndef XPU_ENGINE_DETECTORS_VOID_INTER_H_
#define XPU_ENGINE_DETECTORS_VOID_INTER_H_

#include <map>
#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/detectors/void_baseline.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class VoidInterDetector : public ViewDetector {
 public:
  // `history` may be null: no previous runs.
  VoidInterDetector(std::shared_ptr<WindowViews> views,
                    std::shared_ptr<const DetectorConfig> config,
                    std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "void_inter"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::shared_ptr<history::HistoryCache> history_;
  std::map<std::string, std::map<int32_t, VoidBaseline>> baseline_;
  Streaks streaks_;  // per rank: consecutive windows over (void_inter.persist_windows)
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_VOID_INTER_H_
