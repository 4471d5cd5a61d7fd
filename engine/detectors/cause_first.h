// cause_first — a throughput regression is a symptom. After a job's
// detectors ran for a window, its regression is linked to the causes found
// in the same window (GC or synchronization stalls, a slow DataLoader, a
// slow GPU or link, an un-optimized GEMM, inter-step CPU work, a function
// found by the profiling window) and routed to the team of the first of
// them; a regression without any is routed to the triage destination
// (Team::kTriage) and says that it is unexplained, rather than to
// operations as if its cause were known.
#ifndef XPU_ENGINE_DETECTORS_CAUSE_FIRST_H_
#define XPU_ENGINE_DETECTORS_CAUSE_FIRST_H_

#include <vector>

#include "engine/state/diagnosis.h"

namespace xpu::engine {

// Diagnosis kinds that can explain a throughput regression, most specific
// first: the first one present decides the regression's team.
extern const char* const kRegressionCauses[];
extern const size_t kRegressionCausesCount;

// `job_diagnoses`: one window's diagnoses of one job. Every
// throughput_regression among them gets its cause line(s) and team.
void RouteRegressionsCauseFirst(std::vector<Diagnosis>* job_diagnoses);

// Symptoms that a cause on one of their ranks explains are folded into
// that cause (its evidence gets a line) instead of standing beside it with
// another team: a communicator found slow with no member singled out
// (slow_link "comm:...") when one of its members is a slow_gpu (its peers
// wait for it inside the collective); untraced minority kernels
// (void_minority) on a rank that runs extra GPU work (extra_gpu_work). A
// symptom that lists other ranks too keeps those.
void FoldSymptomsIntoCauses(std::vector<Diagnosis>* job_diagnoses);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_CAUSE_FIRST_H_
