// void_baseline — the judgement both void detectors (void_inter,
// void_minority) make of one rank's void fraction in a window: above the
// (per-backbone) threshold, or more than `delta` above the rank's own first
// windows (its baseline), or more than `delta` above previous runs of the
// job name on the same GPU model (engine/history/). Windows that are not
// over feed the baseline until it holds `baseline_windows`.
//
// Thread-safety: none; owned by a detector, called on the window tick.
#ifndef XPU_ENGINE_DETECTORS_VOID_BASELINE_H_
#define XPU_ENGINE_DETECTORS_VOID_BASELINE_H_

#include <string>

#include "engine/history/baselines.h"

namespace xpu::engine {

class VoidBaseline {
 public:
  struct Verdict {
    bool over = false;
    bool have_base = false;  // the baseline is complete
    double mean_base = 0;
  };
  // `prev`: the figure of previous runs (when enough runs had it), or null.
  // `threshold_applies` false: the absolute threshold is not a reason (the
  // caller has a better reference, e.g. the rank's peers).
  Verdict Judge(double value, double threshold, double delta, int baseline_windows,
                const history::HistoryFigure* prev, bool threshold_applies = true);
  // True while the baseline is not complete, or when `value` is above it.
  bool Above(double value, int baseline_windows) const {
    return windows_ == 0 || windows_ < baseline_windows || value > sum_ / windows_;
  }

 private:
  double sum_ = 0;
  int windows_ = 0;
};

// ", baseline X %" and ", Y % in <previous runs>" for the evidence line, as
// far as they were compared.
std::string VoidComparisons(const VoidBaseline::Verdict& v, const history::HistoryFigure* prev,
                            const history::HistoryBaseline* baseline);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_VOID_BASELINE_H_
