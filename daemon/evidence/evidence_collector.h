// daemon/evidence/evidence_collector.h — answers the engine's "evidence"
// command: for every local process of a job, in parallel and within a
// deadline, its state (/proc), native stacks of all threads (cuda-gdb where
// installed, else gdb: attach, `thread apply all bt`, detach), Python stacks
// (the xputimer package's faulthandler file, else py-spy, else reported as
// unavailable), the hook's per-communicator progress, GPU health (NVML) and,
// on the GPU-less test runtime, intra-kernel ring progress.
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

// Collects everything for `targets` within `deadline_ms` overall.
xpu::v1::EvidenceReply CollectEvidence(const std::vector<EvidenceTarget>& targets,
                                       const EvidenceOptions& options, uint64_t deadline_ms);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_EVIDENCE_COLLECTOR_H_
