// daemon/evidence/process_probe.h — what the daemon can learn about a
// process from outside without stopping it for long: its scheduler state
// (/proc/<pid>/stat), and the output of a helper (gdb, cuda-gdb, py-spy) run
// with a hard deadline.
//
// Thread-safety: every function is reentrant; RunWithTimeout may be called
// from many threads at once (one child each).
#ifndef XPU_DAEMON_EVIDENCE_PROCESS_PROBE_H_
#define XPU_DAEMON_EVIDENCE_PROCESS_PROBE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace xpu::daemon {

// "running", "sleeping", "disk-sleep" (D), "stopped" (T), "tracing-stop" (t),
// "zombie", "dead", "idle", or "gone" (no such pid, or the pid was reused:
// its start time differs from `start_ticks` when that is non-zero).
std::string ProcState(int32_t pid, uint64_t start_ticks);
// Parses the content of /proc/<pid>/stat; false if malformed. Pure.
bool ParseProcStat(const std::string& stat, char* state, uint64_t* start_ticks);
std::string ProcStateName(char state);
// /proc/<pid>/stat starttime, 0 when the process is gone.
uint64_t ProcStartTicks(int32_t pid);
// utime + stime of the whole process (/proc/<pid>/stat fields 14 and 15) in
// clock ticks; -1 when unreadable. Two readings a moment apart tell a
// spinning process (about one CPU) from a blocked one (about none).
int64_t ProcCpuTicks(int32_t pid);
// Parses utime + stime out of /proc/<pid>/stat content; -1 if malformed. Pure.
int64_t ParseCpuTicks(const std::string& stat);
// One line per thread of `pid`, "tid name state wchan", the main thread
// first, at most `max_threads` (then "... N more"): /proc/<pid>/task/*/stat
// and wchan, read without stopping anything. wchan is the kernel function a
// blocked thread sleeps in ("futex_wait_queue", "do_sys_poll", "pipe_read",
// ...), "-" when running or not readable. Empty when the process is gone.
std::string ThreadStates(int32_t pid, size_t max_threads = 64);

struct RunResult {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed by a signal or not started
  std::string output;  // stdout and stderr, truncated to max_bytes
  std::string error;   // why it did not start
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null, in its own
// process group; kills the group after `timeout_ms`. Output beyond
// `max_bytes` is read and discarded.
RunResult RunWithTimeout(const std::vector<std::string>& argv, uint64_t timeout_ms,
                         size_t max_bytes);

// Full path of `name` in PATH, or empty.
std::string FindInPath(const std::string& name);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_PROCESS_PROBE_H_
