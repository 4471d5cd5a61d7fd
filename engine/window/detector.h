// detector — the interface every analysis implements: the slowdown
// detectors (engine/detectors/, one per file) and each monitor's adapter
// beside its monitor (engine/hang/hang_detector.h,
// engine/profile/differential_localization.h).
//
// Threading: OnWindow runs with the job's lock held (on the engine's window
// thread, or on one of its detector threads beside other detectors of the
// same job where the detector says it reads only the window's view and
// state of its own: ConcurrentWithOthers), so a detector sees a consistent
// JobState and must not block or call back into the engine. A detector
// object is used for one engine and may keep state across windows (it is
// never called concurrently with itself).
#ifndef XPU_ENGINE_WINDOW_DETECTOR_H_
#define XPU_ENGINE_WINDOW_DETECTOR_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/state/diagnosis.h"
#include "engine/state/job_state.h"

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
  // True where OnWindow may run beside other detectors' OnWindow on the
  // same job: it only reads the job, the window's built view, the shared
  // thread-safe caches (history, metrics series) and its own state.
  virtual bool ConcurrentWithOthers() const { return false; }
};

// Collecting sink, for the engine and for tests.
class VectorSink : public DiagnosisSink {
 public:
  void Report(Diagnosis d) override { out.push_back(std::move(d)); }
  std::vector<Diagnosis> out;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_WINDOW_DETECTOR_H_
