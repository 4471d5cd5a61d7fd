// timeline_cli — `xpu timeline dump|summary` (AddTimelineCommands in
// command.h). Exit codes as in cli.h. (`xpu stacks`, live stacks, belongs to
// the hang-diagnosis component: hang_cli.*.)
//
//   xpu timeline dump --job J [--ranks 0-7,12|all] [--max-ranks N] [--last N | --since T]
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

#include "xpu/v1/query.pb.h"

namespace xpu::cli {

// The ranks a dump without --ranks fetches from a job of more than `max`
// ranks, so that the trace stays one a person can open: the suspects
// (ranks named by active diagnoses that name at most max/4 ranks, in the
// engine's order, at most max/2), their peers (the other ranks of their
// host, then the neighbouring ranks, up to 3/4 of max), then ranks spread
// evenly across the job (the lowest rank first: the clock reference).
// Jobs of at most `max` ranks: `ranks` stays empty (every rank).
struct RankSelection {
  std::vector<int32_t> ranks;  // ascending
  size_t total = 0;            // ranks of the job
  size_t suspects = 0, peers = 0, spread = 0;
  std::string suspect_text;    // "3700 (slow_gpu), 12 (hang_non_communication)"
};
RankSelection SelectDefaultRanks(const xpu::v1::RanksReply& ranks,
                                 const xpu::v1::DiagnosesReply& diagnoses, size_t max);

// "0-7,12" -> {0..7, 12}; false on malformed input or ranges over 1<<20 ranks.
bool ParseRankList(const std::string& s, std::vector<int32_t>* out);
// "1700000000000000000" (ns since epoch) or "90s", "5m", "2h", "250ms" ago.
bool ParseSince(const std::string& s, uint64_t now_ns, uint64_t* since_ns);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_TIMELINE_CLI_H_
