// unoptimized_gemm — a GEMM shape far below the reference throughput on
// EVERY rank that ran it: not a bad GPU but a bad kernel choice, typically a
// misaligned dimension (XPUTimer §5.2.1, §7) → infrastructure.
//
// Reference, first available: unoptimized_gemm.peak_tflops when configured
// (a data-sheet peak set by the operator); the calibrated peak of the job's
// GPU model for the GEMM's dtype (`xpu calibrate`, engine/history/); else
// the best per-shape TFLOPS of the job so far among shapes of the same dtype
// with at least min_gflop per call (the job's own well-performing GEMMs). A
// shape is reported when its best rank is below ratio × reference, or below
// ratio × what the same signature (dtype, m, n, k, batch, transposes)
// reached in previous runs of the job name on the same GPU model (a kernel
// selection that changed between runs), provided at least
// max(slow_gpu.min_ranks, half the window's ranks) ran it; the alignment
// rule (analysis/gemm.h) explains why when a dimension is not a multiple of
// 64/128 elements. A shape is reported once two consecutive windows find it
// low (a window of start-up effects is not a kernel choice), and never
// when the shape itself reached that reference earlier in the job: its
// kernel is good, and a slowdown since is the device's (slow_gpu).
#ifndef XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_
#define XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_

#include <map>
#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class UnoptimizedGemmDetector : public ViewDetector {
 public:
  // `history` may be null: no calibration and no previous runs.
  UnoptimizedGemmDetector(std::shared_ptr<WindowViews> views,
                          std::shared_ptr<const DetectorConfig> config,
                          std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "unoptimized_gemm"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::shared_ptr<history::HistoryCache> history_;
  std::map<std::string, std::map<uint8_t, double>> best_;  // job -> dtype -> best shape TFLOPS
  // job -> shape -> the best window median the shape itself reached
  std::map<std::string, std::map<std::string, double>> shape_best_;
  Streaks streaks_;                                        // per shape: consecutive windows low
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_
