// detector — the interface every analysis implements. One detector per file
// under engine/detectors/.
//
// Threading: OnWindow runs on the engine's window thread with the job's lock
// held, so a detector sees a consistent JobState and must not block or call
// back into the engine. A detector object is used for one engine and may keep
// state across windows (it is never called concurrently).
#ifndef XPU_ENGINE_DETECTOR_H_
#define XPU_ENGINE_DETECTOR_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/diagnosis.h"
#include "engine/job_state.h"

namespace xpu::engine {

class DiagnosisSink {
 public:
  virtual ~DiagnosisSink() = default;
  virtual void Report(Diagnosis d) = 0;
};

class Detector {
 public:
  virtual ~Detector() = default;
  virtual std::string_view name() const = 0;
  // Called after the job's window was closed: job.windows().back() is the
  // window just closed and job.window_start_ns() is "now" for the detector.
  // Configuration (thresholds) goes to the detector's constructor.
  virtual void OnWindow(const JobState& job, DiagnosisSink& sink) = 0;
};

// Collecting sink, for the engine and for tests.
class VectorSink : public DiagnosisSink {
 public:
  void Report(Diagnosis d) override { out.push_back(std::move(d)); }
  std::vector<Diagnosis> out;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTOR_H_
