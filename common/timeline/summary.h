// summary — `xpu timeline summary`: figures computed on the dumped window
// only, with the shared analyses (common/analysis: steps, void time,
// GEMM TFLOPS, communicator bandwidth, issue latency) applied to the
// records of the dump after clock alignment.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_TIMELINE_SUMMARY_H_
#define XPU_COMMON_TIMELINE_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/json/json.h"
#include "common/timeline/clock_align.h"
#include "common/timeline/rank_dump.h"

namespace xpu::timeline {

struct SignatureTime {
  std::string kind;  // "gemm", "allreduce", "kernel", "py_gc", ...
  std::string name;  // display name (trace_model.h EventName)
  uint64_t count = 0;
  double total_s = 0;
  double share = 0;    // of the summed time of all ops in the window
  uint32_t ranks = 0;  // ranks where it occurs
};

struct RankSummary {
  int32_t rank = -1;
  std::string host;
  bool exited = false;
  uint64_t ops = 0;
  std::string step_source;  // markers / collective_period / none
  size_t steps = 0;         // complete steps in the window
  double step_mean_ms = 0, step_p50_ms = 0, step_max_ms = 0;
  double compute_s = 0, comm_s = 0, copy_s = 0, host_s = 0, sync_s = 0;  // summed op time
  double v_inter = 0, v_minority = 0;
  double gemm_tflops = 0;  // over timed GEMMs not overlapping communication
  double issue_compute_p50_us = 0, issue_comm_p50_us = 0;
};

struct CommSummary {
  std::string op;
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  double busbw_GBps = 0;  // last-arrival method
};

struct TimelineSummary {
  std::string job;
  uint64_t window_start_ns = 0, window_end_ns = 0;
  uint64_t ops = 0;
  std::vector<SignatureTime> top;  // by total time, descending
  std::vector<RankSummary> ranks;
  std::vector<CommSummary> comms;  // by total time, descending
  ClockAlignment clock;
};

TimelineSummary Summarize(const std::vector<RankDump>& ranks, const ClockAlignment& align,
                          size_t top_n = 15);
std::string SummaryText(const TimelineSummary& s);
std::string SummaryJson(const TimelineSummary& s);
// Clock offsets as a JSON object (also used by dump.json).
json::Json ClockJson(const ClockAlignment& a);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_SUMMARY_H_
