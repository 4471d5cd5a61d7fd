#include "engine/detectors/void_baseline.h"

#include "absl/strings/str_cat.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

VoidBaseline::Verdict VoidBaseline::Judge(double value, double threshold, double delta,
                                          int baseline_windows,
                                          const history::HistoryFigure* prev,
                                          bool threshold_applies) {
  Verdict v;
  v.have_base = windows_ >= baseline_windows;
  v.mean_base = windows_ ? sum_ / windows_ : 0;
  v.over = (threshold_applies && value >= threshold) || (v.have_base && value > v.mean_base + delta) ||
           (prev != nullptr && value > prev->value + delta);
  if (!v.over && !v.have_base) {
    sum_ += value;
    windows_++;
  }
  return v;
}

std::string VoidComparisons(const VoidBaseline::Verdict& v, const history::HistoryFigure* prev,
                            const history::HistoryBaseline* baseline) {
  return absl::StrCat(
      v.have_base ? absl::StrCat(", baseline ", Fmt(v.mean_base * 100, 1), " %") : "",
      prev != nullptr
          ? absl::StrCat(", ", Fmt(prev->value * 100, 1), " % in ", baseline->Describe(prev->runs))
          : "");
}

}  // namespace xpu::engine
