// detector_config — the thresholds of the slowdown detectors, by name, with
// defaults and a one-line meaning each (docs/diagnosis-catalogue.md lists
// them). Overrides come from a file given to xpu-engine --detector-config:
//
//   # comment
//   slow_gpu.min_drop = 0.2
//   void_inter.threshold@megatron-llama = 0.08   # per backbone (job name)
//
// A key with "@BACKBONE" applies to jobs whose job_name (XPU_JOB_NAME) is
// BACKBONE; it wins over the plain key.
// Thread-safety: immutable after construction; shared read-only.
#ifndef XPU_ENGINE_WINDOW_DETECTOR_CONFIG_H_
#define XPU_ENGINE_WINDOW_DETECTOR_CONFIG_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace xpu::engine {

struct DetectorParam {
  const char* key;
  double value;
  const char* meaning;
};
// Every parameter with its default.
const std::vector<DetectorParam>& DetectorDefaults();

class DetectorConfig {
 public:
  DetectorConfig() = default;
  // Parses the override file text; unknown keys and bad numbers are errors.
  static absl::StatusOr<DetectorConfig> Parse(std::string_view text);
  static absl::StatusOr<DetectorConfig> Load(const std::string& path);
  // Value for `key` (must be a known key: asking for another is a programmer
  // error and aborts),
  // the backbone-specific one first.
  double Get(std::string_view key, std::string_view backbone = "") const;
  void Set(const std::string& key, double v) { overrides_[key] = v; }

 private:
  std::map<std::string, double, std::less<>> overrides_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_WINDOW_DETECTOR_CONFIG_H_
