// daemon/evidence/evidence_collector.h — answers the engine's "evidence"
// command: for every local process of a job, in parallel and within a
// deadline, its state (/proc), native stacks of all threads (cuda-gdb where
// installed, else gdb: attach, `thread apply all bt`, detach), Python stacks
// (the xputimer package's faulthandler file, else py-spy, else reported as
// unavailable), the hook's per-communicator progress, GPU health (NVML) and,
// on the GPU-less test runtime, intra-kernel ring progress.
//
// Two modes, so that a verdict never waits for a debugger:
//  - quick: what costs no debugger: /proc state, every thread's state and
//    kernel wait channel, the CPU the process uses (a short sample: spinning
//    or blocked), the progress table, ring counters of the test runtime and
//    the Python stacks. Within about a second.
//  - full: the same without the Python stacks (the quick pass took them),
//    plus native stacks from the debugger, on the processes that need it:
//    with cuda-gdb (seconds per attach on a PyTorch process) only those
//    whose kernels are stuck (an outstanding collective or an overdue op in
//    the progress table), where it also reads the NCCL kernels' ring
//    counters, and those that have no other way to say where they are (no
//    Python stacks to be had, not stopped); with gdb (cheap) every live
//    process.
//
// The processes keep running: a debugger stops a process only for the time
// of one backtrace. A helper that overruns its time is killed; a process the
// debugger left stopped because of that gets SIGCONT if it was not stopped
// before.
//
// Thread-safety: Collect() is reentrant; it starts one thread per process.
#ifndef XPU_DAEMON_EVIDENCE_EVIDENCE_COLLECTOR_H_
#define XPU_DAEMON_EVIDENCE_EVIDENCE_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

struct EvidenceTarget {
  uint64_t process_key = 0;
  xpu::v1::ProcessIdentity identity;
  int32_t pid = 0;           // in the daemon's pid namespace
  uint64_t start_ticks = 0;  // /proc starttime at registration, 0 unknown
  bool exited = false;
  xpu::v1::HangProgress progress;
  bool has_progress = false;
};

struct EvidenceOptions {
  // Debugger for native stacks: XPU_EVIDENCE_DEBUGGER, else cuda-gdb when in
  // PATH, else gdb. "none" disables native stacks.
  std::string debugger;
  // Directory of the Python faulthandler files (file name convention:
  // xpu-pystack-<pid>.txt), XPU_PYSTACK_DIR; signal XPU_PYSTACK_SIGNAL
  // (default SIGUSR2) asks the process to dump into it.
  std::string pystack_dir;
  int pystack_signal = 0;
  size_t max_stack_bytes = 512 * 1024;
  bool fake_nccl = false;
};

// Options from the environment (see above).
EvidenceOptions EvidenceOptionsFromEnv();

enum class EvidenceMode { kQuick, kFull };
// "quick" -> kQuick, anything else (the empty default) -> kFull.
EvidenceMode EvidenceModeFromString(const std::string& mode);

// Collects the evidence of `mode` for `targets` within `deadline_ms` overall.
xpu::v1::EvidenceReply CollectEvidence(const std::vector<EvidenceTarget>& targets,
                                       const EvidenceOptions& options, uint64_t deadline_ms,
                                       EvidenceMode mode = EvidenceMode::kFull);

// Whether the full pass attaches the debugger to a process in `state` (pure;
// see above). `kernels_stuck`: the progress table shows an outstanding
// collective or an overdue op; `python_possible`: the process registered
// for faulthandler stacks or py-spy is installed. `why_not` gets the reason
// when it does not.
bool WantsDebugger(const std::string& debugger, const std::string& state, bool kernels_stuck,
                   bool python_possible, std::string* why_not);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_EVIDENCE_COLLECTOR_H_
