// tools/sim/fault.h — the faults xpu-sim can inject, how they are written on
// the command line, and what the engine must answer for each.
//
// Syntax: KIND:RANKS[:AT_WINDOW], e.g. `slow_gpu:3`, `gc:0,17-19:4`. RANKS
// is a comma list of ranks and ranges; AT_WINDOW (default 2) is the first
// window (counted from 0) whose steps carry the fault. Slowdowns last to the
// end of the run; a hang stops the job at its first step of AT_WINDOW.
//
// Each kind maps to the catalogue's diagnosis (docs/diagnosis-catalogue.md,
// docs/hang-diagnosis.md): the kind the engine must report, the team it
// routes to and the ranks it must name (`ExpectedCulprits`).
//
// Thread-safety: value types and pure functions.
#ifndef XPU_TOOLS_SIM_FAULT_H_
#define XPU_TOOLS_SIM_FAULT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace xpu::sim {

enum class FaultKind {
  kSlowGpu,     // GEMMs of the rank run `factor` times longer
  kSlowLink,    // collectives and point-to-point links the rank joins run slower
  kGc,          // Python GC pauses before every layer on the rank
  kDataLoader,  // the rank's DataLoader takes most of the step
  kSync,        // a stream synchronize after every forward layer
  kStop,        // the process is stopped (SIGSTOP) before a collective
  kPython,      // the process never leaves a Python function: never issues the collective
  kHang,        // a collective hangs inside the kernel: the ring link rank -> next stalls
  kMismatch,    // the rank issues a collective of another size than its peers
};

struct FaultSpec {
  FaultKind kind = FaultKind::kSlowGpu;
  std::vector<int32_t> ranks;  // sorted, unique
  int at_window = 2;
};

// Every kind, in the order above.
const std::vector<FaultKind>& AllFaultKinds();
const char* FaultKindName(FaultKind k);
// One line per kind for --help.
std::string FaultKindHelp();
bool IsHangFault(FaultKind k);

// Parses KIND:RANKS[:AT_WINDOW]; ranks must lie in [0, nranks).
absl::StatusOr<FaultSpec> ParseFault(std::string_view text, int32_t nranks);
// "0,3-5,9" -> {0,3,4,5,9}; sorted, duplicates removed.
absl::StatusOr<std::vector<int32_t>> ParseRankList(std::string_view text, int32_t nranks);
// {0,3,4,5,9} -> "0,3-5,9".
std::string RankListString(const std::vector<int32_t>& ranks);

// What the engine must report for a fault.
struct Expectation {
  std::vector<std::string> kinds;  // any of these diagnosis kinds
  std::string subject_prefix;      // "" = any subject, e.g. "gc" for kernel_issue_stall
  std::string team;                // operations / infrastructure / algorithm
  std::vector<int32_t> ranks;      // exactly these ranks
};
// `ring_next(r)` gives the rank after r on the ring of the collective a
// `hang` fault stalls (both ends of the stalled link are named).
Expectation ExpectationFor(const FaultSpec& f, const std::function<int32_t(int32_t)>& ring_next);

// Diagnosis kinds that may accompany any fault as its symptoms: the step
// got slower, a profiling window localized the slow function, a stopped
// rank fell silent.
bool IsSymptomKind(std::string_view kind);

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_FAULT_H_
