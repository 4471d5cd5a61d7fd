// void_minority — untraced ("minority") GPU kernels take a large share of
// the step (XPUTimer §5.2.2, V_minority = T_minority / (T_step - T_inter),
// estimated from queued gaps between traced kernels, analysis/void_time.h)
// → infrastructure (kernel fusion, backbone).
//
// A rank is reported when V_minority exceeds by void_minority.history_delta
// the rank's baseline (first windows of the job) or the median V_minority
// of previous runs of the job name on the same GPU model (engine/history/),
// or is over void_minority.threshold where one is set (off by default: the
// share a program's untraced kernels take is its shape, 26 % in healthy
// FSDP; an operator sets it per backbone, void_minority.threshold@JOB_NAME),
// once that held void_minority.persist_windows consecutive windows. With
// peers (two or more ranks with steps), the
// threshold counts only program-wide (the job's lower median over it: every
// rank's untraced kernels) or for a rank that stands out (twice its peers'
// figure and history_delta above it: the other rank of two, else the
// median); a rank over it whose peers are close below keeps it as its
// baseline. Traced work on another stream is not minority time
// (analysis/void_time.h); extra traced work on one rank is extra_gpu_work's.
#ifndef XPU_ENGINE_DETECTORS_VOID_MINORITY_H_
#define XPU_ENGINE_DETECTORS_VOID_MINORITY_H_

#include <map>
#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/detectors/void_baseline.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class VoidMinorityDetector : public ViewDetector {
 public:
  // `history` may be null: no previous runs.
  VoidMinorityDetector(std::shared_ptr<WindowViews> views,
                       std::shared_ptr<const DetectorConfig> config,
                       std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "void_minority"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::shared_ptr<history::HistoryCache> history_;
  std::map<std::string, std::map<int32_t, VoidBaseline>> baseline_;
  Streaks streaks_;  // per rank: consecutive windows over (void_minority.persist_windows)
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_VOID_MINORITY_H_
