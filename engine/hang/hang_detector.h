// engine/hang/hang_detector.h — hands the hang monitor's ongoing diagnoses
// to the engine's window tick, so that hangs go through the same diagnosis
// tracker, store and alert routing as the other detectors' findings. The
// monitor decides; this adapter only reports.
//
// Threading: OnWindow runs on the window thread with the job's lock held;
// it takes only the monitor's own lock (which the monitor never holds while
// taking a job lock).
#ifndef XPU_ENGINE_HANG_HANG_DETECTOR_H_
#define XPU_ENGINE_HANG_HANG_DETECTOR_H_

#include "engine/hang/hang_monitor.h"
#include "engine/window/detector.h"

namespace xpu::engine::hang {

class HangDetector : public Detector {
 public:
  explicit HangDetector(const HangMonitor* monitor) : monitor_(monitor) {}
  std::string_view name() const override { return "hang"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override {
    if (monitor_ == nullptr) return;
    if (std::optional<Diagnosis> d = monitor_->ActiveDiagnosis(job.job())) sink.Report(*d);
  }

 private:
  const HangMonitor* monitor_;
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_HANG_DETECTOR_H_
