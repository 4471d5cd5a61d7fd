// engine/hang/report.h — one hang diagnosis of a job: the verdict
// (classify.h), per-rank evidence summaries, the merged stack view, timings.
// Rendered as JSON (for `xpu hang --json` and tools) and as text.
//
// Thread-safety: a value type.
#ifndef XPU_ENGINE_HANG_REPORT_H_
#define XPU_ENGINE_HANG_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/hang/classify.h"
#include "engine/hang/stack_tree.h"

namespace xpu::engine::hang {

struct RankSummary {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string proc_state;
  bool answered = false;
  std::string where;   // innermost frames of the main thread
  std::string comms;   // "comm 1a2b: issued 12 completed 11 pending allreduce#12 (2048 B)"
  std::string open;    // open host intervals
  std::string kernel;  // intra-kernel progress
  std::string native_error, python_error, gpu_health;
  uint64_t collect_ms = 0;
  std::string overdue;   // the hook's overdue op, when one is
  std::string threads;   // "tid name state wchan" lines
  double cpu_busy = -1;  // CPUs used over a short sample, -1 unknown
  int64_t progress_age_ms = -1;  // since its last progress record, -1 unknown
};

struct HangReport {
  std::string job;
  bool on_demand = false;       // `xpu stacks`: collected on request, no suspicion
  std::string trigger;          // why the engine suspected a hang
  uint64_t stall_since_ns = 0;  // last progress (host clock), 0 unknown
  uint64_t suspected_ns = 0;    // engine noticed
  uint64_t diagnosed_ns = 0;    // first verdict ready (from the quick evidence)
  uint64_t refined_ns = 0;      // verdict from the full evidence, 0 while it is pending
  std::string phase;            // "quick" (first verdict), "full" (refined), "on-demand"
  std::string first_verdict;    // the quick verdict, when the full one differs
  uint64_t threshold_ns = 0;    // no-progress threshold of the job at the suspicion
  uint64_t evidence_ms = 0;     // fan-out to daemons, every pass
  uint32_t daemons_asked = 0, daemons_answered = 0;
  Verdict verdict;
  std::vector<RankSummary> ranks;
  StackTree tree;
  std::string Json() const;
  std::string Text() const;
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_REPORT_H_
