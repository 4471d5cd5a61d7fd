// tools/sim/judge.h — did the engine find what xpu-sim injected? Matches the
// engine's diagnoses (Query.Diagnoses) against each fault's expectation
// (fault.h) and turns a run into xpu-sim's one-line JSON report.
//
// A fault is found when a diagnosis of an expected kind (and subject, where
// the kind has several causes) names exactly the expected ranks and routes
// to the expected team; its delay is counted in windows from the fault's
// first window (the engine reports at window ends, so a diagnosis in the
// window that closes the fault's first window is 1 window after it). A
// diagnosis that matches no fault and is not a symptom kind (fault.h,
// IsSymptomKind) is unexpected. A healthy run (no fault) must have no
// diagnosis at all.
//
// Thread-safety: pure functions.
#ifndef XPU_TOOLS_SIM_JUDGE_H_
#define XPU_TOOLS_SIM_JUDGE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/json/json.h"
#include "tools/sim/fault.h"

namespace xpu::sim {

struct DiagnosisSeen {
  std::string kind, subject, team, severity;
  std::vector<int32_t> ranks;
  size_t hosts = 0;
  uint64_t first_seen_ns = 0;
  bool active = true;
  std::string evidence;
};

struct FaultOutcome {
  FaultSpec fault;
  Expectation expect;
  bool found = false;        // right kind, culprit and team
  bool in_time = false;      // ... within max_windows
  int windows = -1;          // windows from the fault's first window to the diagnosis
  double seconds = -1;       // from the fault's first window start
  std::string matched_kind;  // the diagnosis that found it
};

struct Judgement {
  std::vector<FaultOutcome> faults;
  std::vector<const DiagnosisSeen*> unexpected;
  bool ok = false;
};

// `window0_ns` is the start of window 0 and `window_ns` the window length;
// faults must be found within `max_windows`.
Judgement Judge(const std::vector<FaultSpec>& faults,
                const std::function<int32_t(int32_t)>& ring_next,
                const std::vector<DiagnosisSeen>& seen, uint64_t window0_ns, uint64_t window_ns,
                int max_windows);

// A diagnosis as a JSON object (ranks compressed as "0-3,8").
json::Json DiagnosisJson(const DiagnosisSeen& d, uint64_t fault_ns);
json::Json OutcomeJson(const FaultOutcome& o);

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_JUDGE_H_
