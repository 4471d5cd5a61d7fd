// hang_cli — `xpu hang` and `xpu stacks`, dispatched from RunCli (cli.cc).
// Exit codes as in cli.h.
//
//   xpu hang --job J [--json] [--svg FILE] [--folded FILE]
//       the engine's latest hang diagnosis of J: classification, culprit
//       ranks and hosts, team, evidence, merged stacks. Without one: "no
//       hang diagnosed" (exit 0; --json prints {"job":J,"found":false}).
//   xpu stacks --job J [--json] [--svg FILE] [--folded FILE] [--deadline-s S]
//       collects the stacks of every rank of the live job J now and prints
//       the merged view (frames with the ranks in / not in them).
// Common: --engine ADDR ($XPU_ENGINE), --token-file F, --tls, --tls-ca F,
// --tls-cert F, --tls-key F.
// --json prints the report object of engine/hang/report.h with "found":true
// added: {job, found, on_demand, classification, team, culprits, culprit_ranks,
// hosts, reason, details, faulty_link, comm_id, stuck_seq, trigger,
// stall_since_ns, suspected_ns, diagnosed_ns, stall_to_diagnosis_s,
// evidence_ms, daemons_asked, daemons_answered, ranks: [...], merged_stacks}.
#ifndef XPU_TOOLS_XPU_CLI_HANG_CLI_H_
#define XPU_TOOLS_XPU_CLI_HANG_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace xpu::cli {

// True when the command word of `args` is "hang" or "stacks".
bool IsHangCommand(const std::vector<std::string>& args);
int RunHangCli(const std::vector<std::string>& args, const std::string& env_engine,
               std::ostream& out, std::ostream& err);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_HANG_CLI_H_
