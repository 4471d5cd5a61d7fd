#include "engine/detectors/cause_first.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xpu::engine {

const char* const kRegressionCauses[] = {
    "kernel_issue_stall", "slow_dataloader",   "slow_gpu",          "slow_link",
    "extra_gpu_work",     "unoptimized_gemm",  "void_inter",        "abnormal_function",
    "void_minority",      "unexpected_function",
};
const size_t kRegressionCausesCount = sizeof(kRegressionCauses) / sizeof(kRegressionCauses[0]);

namespace {

std::string Describe(const Diagnosis& d) {
  return absl::StrCat(d.kind, d.subject.empty() ? "" : absl::StrCat("(", d.subject, ")"),
                      " on rank(s) ", absl::StrJoin(d.ranks, ","), " -> ", std::string(TeamName(d.team)));
}

}  // namespace

void RouteRegressionsCauseFirst(std::vector<Diagnosis>* job_diagnoses) {
  std::vector<const Diagnosis*> causes;
  for (size_t c = 0; c < kRegressionCausesCount; ++c) {
    for (const Diagnosis& d : *job_diagnoses) {
      if (d.kind == kRegressionCauses[c]) causes.push_back(&d);
    }
  }
  std::vector<std::string> lines;
  for (const Diagnosis* c : causes) lines.push_back(Describe(*c));
  const Team team = causes.empty() ? Team::kTriage : causes.front()->team;
  for (Diagnosis& d : *job_diagnoses) {
    if (d.kind != "throughput_regression") continue;
    d.team = team;
    if (causes.empty()) {
      d.evidence += "\nunexplained: no cause found in this window (no GC or synchronization "
                    "stall, slow DataLoader, slow GPU or link, un-optimized GEMM, inter-step "
                    "CPU work or extra GPU work); routed to triage";
    } else {
      d.evidence += absl::StrCat("\ncaused by: ", absl::StrJoin(lines, "; "));
    }
  }
}

}  // namespace xpu::engine
