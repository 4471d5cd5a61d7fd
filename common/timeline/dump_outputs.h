// dump_outputs — turns the processes of a timeline dump into the files of
// DIR: trace.perfetto-trace and/or trace.json, callsites.folded +
// callsites.svg (when the dump holds call-site stacks) and dump.json (what
// was asked, what answered, clock offsets, figures). The raw per-process
// files (DIR/raw/*.xpb, rank_dump.h) are written by the caller as the data
// arrives.
//
// Thread-safety: pure functions (one call owns DIR).
#ifndef XPU_COMMON_TIMELINE_DUMP_OUTPUTS_H_
#define XPU_COMMON_TIMELINE_DUMP_OUTPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/timeline/clock_align.h"
#include "common/timeline/flamegraph.h"
#include "common/timeline/rank_dump.h"
#include "common/timeline/trace_writer.h"

namespace xpu::timeline {

enum class TraceFormat { kPerfetto, kJson, kBoth, kAuto };
// "perfetto", "json", "both", "auto"; false when unknown.
bool ParseTraceFormat(const std::string& s, TraceFormat* f);
// kAuto: Perfetto always, Chrome JSON too while the dump is small (JSON
// costs ~10x the bytes per op and viewers struggle beyond ~1M events).
inline constexpr uint64_t kAutoJsonMaxOps = 200000;

struct DumpOutputs {
  std::string perfetto_path, json_path, folded_path, svg_path, manifest_path;
  TraceStats perfetto, json;
  ClockAlignment clock;
  CallsiteStats callsites;
  uint64_t ops = 0;
  uint64_t packed_bytes = 0;  // records as dumped: 32 bytes per op
  double align_s = 0, perfetto_s = 0, json_s = 0, flame_s = 0;
};

// Manifest fields that only the caller knows.
struct DumpContext {
  std::string job;
  std::vector<int32_t> ranks_requested;  // empty = all
  uint32_t ranks_total = 0, ranks_answered = 0;
  std::vector<std::string> missing;  // "rank 5: reason"
  std::vector<std::string>
      from_engine;  // served from the engine's ring: "rank 5: why not the daemon"
  std::vector<std::string> truncated_daemons;
  uint64_t last_n = 0, since_ns = 0, until_ns = 0;
  // When a daemon's budget left records out: --before this for the next
  // (older) page; 0 when nothing was left out.
  uint64_t next_before_ns = 0;
  // A large job dumped without a rank list: which ranks were chosen and
  // how many were left out ("" / 0 otherwise).
  std::string selection;
  uint64_t ranks_left_out = 0;
  double fetch_s = 0;
};

absl::StatusOr<DumpOutputs> WriteDumpOutputs(const std::string& dir,
                                             const std::vector<RankDump>& ranks, TraceFormat format,
                                             const DumpContext& ctx);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_DUMP_OUTPUTS_H_
