// scenario — a scenario file (tests/scenarios/*.json) parsed: which anomaly
// to inject (for the synthetic generator, and how the same anomaly is
// injected into xpu-fake-train), what the engine must diagnose, and within
// how many windows. See README.md in this directory for the format.
#ifndef XPU_TESTS_SCENARIOS_SCENARIO_H_
#define XPU_TESTS_SCENARIOS_SCENARIO_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/scenarios/synthetic_job.h"

namespace xpu::scenarios {

struct Expectation {
  std::string kind;
  std::vector<int> ranks;  // exact set of ranks the diagnosis must name (empty: any)
  std::string team;
  std::string evidence;  // text the evidence must contain in the last window (empty: any)
};

// Previous runs of the same job name, run through the same engine (and
// database) before the scenario's run, so that the engine has history.
struct HistoryRuns {
  int runs = 0;
  int windows = 0;      // per run; 0: the scenario's windows
  ScenarioFault fault;  // usually none: healthy history
  bool faulty = false;  // a fault was given: its runs may be diagnosed
};

struct Scenario {
  std::string name;
  std::string description;
  SyntheticJobSpec job;
  int windows = 6;
  int steps_per_window = 5;
  int max_windows = 4;  // expected diagnoses must appear by then
  // A deliberately small job (fewer than 8 ranks, e.g. a 2-GPU node) that
  // checks how a detector copes without a peer majority.
  bool small_job = false;
  std::vector<Expectation> expect;
  std::vector<std::string> allow;  // other kinds that may appear as well
  HistoryRuns history;
  // Uploaded through History.UploadCalibration before the run: dtype ->
  // TFLOPS for the job's GPU model (as `xpu calibrate` would).
  std::map<std::string, double> calibrated_gemm_tflops;
  // Collective calibration points: (op, bytes, nranks, nodes) -> busbw GB/s.
  struct CalibratedBusBw {
    std::string op;
    uint64_t bytes = 0;
    int nranks = 0;
    int nodes = 1;
    double gbps = 0;
  };
  std::vector<CalibratedBusBw> calibrated_busbw;
  // How to inject the same anomaly into the GPU-less runtime (documentation
  // for the real-pipeline runner): environment and xpu-fake-train flags.
  std::map<std::string, std::string> fake_train_env;
  std::vector<std::string> fake_train_args;
};

absl::StatusOr<Scenario> ParseScenario(const std::string& json_text);
absl::StatusOr<Scenario> LoadScenario(const std::string& path);

}  // namespace xpu::scenarios

#endif  // XPU_TESTS_SCENARIOS_SCENARIO_H_
