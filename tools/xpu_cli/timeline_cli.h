// timeline_cli — `xpu timeline dump|summary` (AddTimelineCommands in
// command.h). Exit codes as in cli.h. (`xpu stacks`, live stacks, belongs to
// the hang-diagnosis component: hang_cli.*.)
//
//   xpu timeline dump --job J [--ranks 0-7,12] [--last N | --since T]
//                     [--out DIR] [--format perfetto|json|both|auto]
//                     [--deadline-s S] [--no-engine-fallback] [--json]
//   xpu timeline summary (--in DIR | --job J [--ranks ..] [--last N | --since T]) [--json]
//
// --since T: nanoseconds since the Unix epoch, or an age such as 90s, 5m, 2h.
// dump --json prints the manifest (DIR/dump.json, see docs/timeline.md).
#ifndef XPU_TOOLS_XPU_CLI_TIMELINE_CLI_H_
#define XPU_TOOLS_XPU_CLI_TIMELINE_CLI_H_

#include <cstdint>
#include <string>
#include <vector>

namespace xpu::cli {

// "0-7,12" -> {0..7, 12}; false on malformed input or ranges over 1<<20 ranks.
bool ParseRankList(const std::string& s, std::vector<int32_t>* out);
// "1700000000000000000" (ns since epoch) or "90s", "5m", "2h", "250ms" ago.
bool ParseSince(const std::string& s, uint64_t now_ns, uint64_t* since_ns);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_TIMELINE_CLI_H_
