// profile_cli — `xpu profile`, dispatched from RunCli (cli.cc). Exit codes as
// in cli.h.
//
//   xpu profile --job J [--seconds S] [--json] [--deadline-s D]
//       runs a profiling window of S seconds (default: the engine's, 15) on
//       every rank of the live job J now: CUPTI kernel activity plus the
//       Python events, summarized per rank into PerfTracker behaviour
//       patterns, then the differential localization. Prints the ranks (and
//       why some were not profiled, e.g. "skipped: another CUPTI client is
//       active"), the abnormal function executions and the diagnoses.
//   xpu profile --job J --last [--json]
//       the latest result (automatic, after a throughput regression, or on
//       demand) without starting a window; "no profiling window" otherwise.
// Common: --engine ADDR ($XPU_ENGINE), --token-file F, --tls, --tls-ca F,
// --tls-cert F, --tls-key F.
// --json prints the report object of engine/profile/profile_report.h with
// "found":true added: {found, job, trigger, requested_ns, finished_ns,
// window_ms, daemons_asked, daemons_answered, ranks_profiled, ranks_skipped,
// skipped_reason, ranks: [...], functions: [...], findings: [...],
// diagnoses: [...]}; without a result {"job":J,"found":false}.
#ifndef XPU_TOOLS_XPU_CLI_PROFILE_CLI_H_
#define XPU_TOOLS_XPU_CLI_PROFILE_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace xpu::cli {

// True when the command word of `args` is "profile".
bool IsProfileCommand(const std::vector<std::string>& args);
int RunProfileCli(const std::vector<std::string>& args, const std::string& env_engine,
                  std::ostream& out, std::ostream& err);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_PROFILE_CLI_H_
