// detector — the interface every analysis implements: the slowdown
// detectors (engine/detectors/, one per file) and each monitor's adapter
// beside its monitor (engine/hang/hang_detector.h,
// engine/profile/differential_localization.h).
//
// Threading: OnWindow runs on the engine's window thread with the job's
// lock held, so that the detector sees a consistent JobState; it must not
// block or call back into the engine. A detector that says it reads only
// the window's view and state of its own (ReadsOnlyTheView) runs
// instead without the job's lock, while the ingest goes on filling the
// job's rings, on one of the window's detector threads beside the other
// such detectors of the job. A detector object is used for one engine and
// may keep state across windows (it is never called concurrently with
// itself).
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
  // True where OnWindow may run without the job's lock, beside other
  // detectors' OnWindow on the same job: of the job it reads only job() and
  // window_start_ns(); otherwise the window's built view (a copy of the
  // window's records, the ranks' identities, the job's name and GPU
  // model), the shared thread-safe caches (history, prepared for the
  // window; metrics series) and its own state.
  virtual bool ReadsOnlyTheView() const { return false; }
};

// Collecting sink, for the engine and for tests.
class VectorSink : public DiagnosisSink {
 public:
  void Report(Diagnosis d) override { out.push_back(std::move(d)); }
  std::vector<Diagnosis> out;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_WINDOW_DETECTOR_H_
