// tools/sim/engine_process.h — the private xpu-engine that xpu-sim starts
// (`--engine embedded`): a child process on a free loopback port with its
// own database in a temporary directory, optionally pinned to some CPUs,
// whose CPU time and memory are read from /proc.
//
// Thread-safety: Start/Stop from one thread; Usage() from any.
#ifndef XPU_TOOLS_SIM_ENGINE_PROCESS_H_
#define XPU_TOOLS_SIM_ENGINE_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xpu::sim {

struct EngineProcessOptions {
  std::string binary;       // xpu-engine
  double window_s = 10;
  double silent_after_s = 30;
  std::string cpus;         // "0-3" pins the engine (sched_setaffinity); "" = any
  std::string log_file;     // the engine's stderr; "" = a file in the work directory
  std::vector<std::string> extra_args;
  std::vector<std::string> env;  // NAME=VALUE added to the engine's environment
  std::string token;  // the shared token the engine was given (--token-file); "" = none
};

struct ProcessUsage {
  double cpu_s = 0;          // user + system of the engine process
  uint64_t rss_bytes = 0;    // VmRSS
  uint64_t peak_rss_bytes = 0;  // VmHWM
  uint64_t threads = 0;
};

class EngineProcess {
 public:
  ~EngineProcess();
  // Starts the engine and waits until it serves (its Query.Status answers).
  static absl::StatusOr<std::unique_ptr<EngineProcess>> Start(const EngineProcessOptions& o);
  const std::string& target() const { return target_; }
  pid_t pid() const { return pid_; }
  const std::string& log_file() const { return log_file_; }
  const std::string& dir() const { return dir_; }
  // Current figures; zero after the process ended.
  ProcessUsage Usage() const;
  // True while the child runs.
  bool Alive();
  // SIGTERM, then SIGKILL after `grace_s`; removes the work directory unless
  // keep_dir. Returns the exit status text.
  std::string Stop(double grace_s = 20, bool keep_dir = false);

 private:
  EngineProcess() = default;
  pid_t pid_ = -1;
  int exit_status_ = -1;
  std::string target_, dir_, log_file_;
};

// The xpu-engine next to this program (the installed bin/ directory, or the
// build tree's engine/ folder); "" when none is found.
std::string FindEngineBinary();
// The `xpu` CLI next to this program (or in the build tree's tools/xpu_cli
// folder); "" when none is found.
std::string FindCliBinary();
// Runs `argv` (argv[0] a path) with stdout and stderr sent to /dev/null and
// waits for it. Returns the wall-clock seconds and the exit status (-1 when it
// could not run or was killed).
struct TimedRun {
  double wall_s = 0;
  int exit_status = -1;
};
TimedRun RunTimed(const std::vector<std::string>& argv);
// Parses "0-3,8" into CPU numbers.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& s);
// Raises RLIMIT_NOFILE to its hard limit (many streams need many sockets).
void RaiseFileLimit();

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_ENGINE_PROCESS_H_
