#include "engine/analysis/trace.h"

#include <algorithm>

namespace xpu::engine::analysis {

void RankTrace::Sort() {
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& a, const Op& b) { return a.start_ns < b.start_ns; });
}

}  // namespace xpu::engine::analysis
