// tools/sim/simulator.h — xpu-sim's run: the model (cluster_model.h) played
// through one Ingest stream per simulated host (host_stream.h) into an
// engine (a private one, engine_process.h, or --engine HOST:PORT), window by
// window in real time, then judged (judge.h).
//
// Time: the engine closes windows at multiples of --window-s since the Unix
// epoch. Window w of the run starts at the first such boundary after set-up
// plus w windows; its steps start just after the boundary, and every host
// sends them at once, one Batch per step (a daemon flush), each process with
// its counters and hang-watch table. The tick at the window's end analyses
// them. While the job hangs, every host sends its processes' counters once
// per window and when the hook's hang watch would raise its flag
// (hang_floor_s after the stuck collective was issued). Diagnoses are read
// with Query.Diagnoses half a window after each tick.
//
// Thread-safety: Run() once, from one thread.
#ifndef XPU_TOOLS_SIM_SIMULATOR_H_
#define XPU_TOOLS_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json/json.h"
#include "tools/sim/cluster_model.h"

namespace xpu::sim {

struct SimOptions {
  ModelSpec model;
  int windows = 6;
  double window_s = 10;
  std::string engine = "embedded";  // or HOST:PORT
  std::string engine_binary;        // embedded: "" = next to xpu-sim
  std::string engine_cpus;          // embedded: pin the engine to these CPUs
  std::vector<std::string> engine_args;
  std::string token_file;
  double hang_floor_s = -1;  // the simulated hook's XPU_HANG_FLOOR_S; < 0: min(10, window/2)
  int connections = 256;     // TCP connections the hosts' streams share
  int threads = 0;           // batch builders; 0 = hardware threads
  int max_windows = 2;       // a fault must be diagnosed within this many windows
  bool progress = true;      // a line per window on stderr
  bool keep_engine_dir = false;
  // Records as a daemon sends them: compact (common/wire/record_codec.h,
  // when the engine's HelloAck says it reads it) or raw.
  bool compact_records = true;
};

struct SimReport {
  json::Json json;  // the one-line result
  bool ok = false;  // every fault found in time, nothing unexpected
};

absl::StatusOr<SimReport> RunSimulation(const SimOptions& o);

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_SIMULATOR_H_
