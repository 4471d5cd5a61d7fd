// tools/sim/sim_flags.h — xpu-sim's command line (common/cli conventions:
// --help, --version, usage errors exit 2) and the program around a run:
// progress on stderr, one JSON line on stdout, the exit status.
//
// Exit status: 0 every injected fault was diagnosed with the right culprit
// and team within --max-windows (or, without faults, nothing was
// diagnosed); 1 it was not; 2 usage error; 3 the run could not be made
// (no engine, streams refused).
//
// Thread-safety: plain functions.
#ifndef XPU_TOOLS_SIM_SIM_FLAGS_H_
#define XPU_TOOLS_SIM_SIM_FLAGS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/simulator.h"

namespace xpu::sim {

struct ParsedFlags {
  SimOptions options;
  bool exit_now = false;  // --help / --version / usage error: `exit_code` says which
  int exit_code = 0;
};

// Parses argv (without argv[0]); help, version and usage errors are written
// to `out` / `err`.
ParsedFlags ParseSimFlags(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err);

// The whole program.
int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_SIM_FLAGS_H_
