#include "engine/detectors/cause_first.h"

#include <algorithm>
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

struct SymptomRule {
  const char* symptom;
  const char* subject_prefix;  // of the symptom's subject
  const char* cause;
  bool whole;  // one explained rank explains the whole symptom
};
const SymptomRule kSymptomRules[] = {
    {"slow_link", "comm:", "slow_gpu", true},
    {"void_minority", "", "extra_gpu_work", false},
};

}  // namespace

void FoldSymptomsIntoCauses(std::vector<Diagnosis>* job_diagnoses) {
  std::vector<Diagnosis>& v = *job_diagnoses;
  std::vector<bool> drop(v.size(), false);
  for (const SymptomRule& rule : kSymptomRules) {
    for (size_t s = 0; s < v.size(); ++s) {
      if (v[s].kind != rule.symptom || v[s].subject.rfind(rule.subject_prefix, 0) != 0) continue;
      std::vector<int32_t> left;
      bool explained = false;
      for (int32_t r : v[s].ranks) {
        Diagnosis* cause = nullptr;
        for (Diagnosis& c : v) {
          if (c.kind == rule.cause && std::find(c.ranks.begin(), c.ranks.end(), r) != c.ranks.end()) {
            cause = &c;
          }
        }
        if (cause == nullptr) {
          left.push_back(r);
          continue;
        }
        if (!explained) {
          absl::StrAppend(&cause->evidence, "\nalso explains ", v[s].kind, "(", v[s].subject,
                          ") on rank(s) ", absl::StrJoin(v[s].ranks, ","), ": ", v[s].evidence);
        }
        explained = true;
      }
      if (!explained) continue;
      if (rule.whole || left.empty()) {
        drop[s] = true;
      } else {
        v[s].ranks = left;
      }
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (drop[i]) continue;
    if (k != i) v[k] = std::move(v[i]);
    ++k;
  }
  v.resize(k);
}

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
