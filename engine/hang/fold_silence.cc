#include "engine/hang/fold_silence.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace xpu::engine::hang {

int FoldSilenceIntoHang(std::vector<Diagnosis>* job_diagnoses) {
  std::vector<Diagnosis>& v = *job_diagnoses;
  auto hang = std::find_if(v.begin(), v.end(), [](const Diagnosis& d) {
    return std::string_view(d.kind).substr(0, 5) == "hang_" && d.severity != Severity::kInfo;
  });
  if (hang == v.end()) return 0;
  std::string folded;
  int n = 0;
  for (const Diagnosis& d : v) {
    if (d.kind != "rank_silent") continue;
    absl::StrAppend(&folded, "\nsilent (same hang, not reported apart): ", d.evidence);
    ++n;
  }
  if (n == 0) return 0;
  hang->evidence += folded;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](const Diagnosis& d) { return d.kind == "rank_silent"; }),
          v.end());
  return n;
}

}  // namespace xpu::engine::hang
