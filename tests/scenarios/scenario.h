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
};

struct Scenario {
  std::string name;
  std::string description;
  SyntheticJobSpec job;
  int windows = 6;
  int steps_per_window = 5;
  int max_windows = 4;                  // expected diagnoses must appear by then
  std::vector<Expectation> expect;
  std::vector<std::string> allow;       // other kinds that may appear as well
  // How to inject the same anomaly into the GPU-less runtime (documentation
  // for the real-pipeline runner): environment and xpu-fake-train flags.
  std::map<std::string, std::string> fake_train_env;
  std::vector<std::string> fake_train_args;
};

absl::StatusOr<Scenario> ParseScenario(const std::string& json_text);
absl::StatusOr<Scenario> LoadScenario(const std::string& path);

}  // namespace xpu::scenarios

#endif  // XPU_TESTS_SCENARIOS_SCENARIO_H_
