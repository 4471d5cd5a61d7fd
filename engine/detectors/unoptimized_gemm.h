// unoptimized_gemm — a GEMM shape far below the reference throughput on
// EVERY rank that ran it: not a bad GPU but a bad kernel choice, typically a
// misaligned dimension (XPUTimer §5.2.1, §7) → infrastructure.
//
// Reference: unoptimized_gemm.peak_tflops when configured (a calibrated or
// data-sheet peak), else the best per-shape TFLOPS of the job so far among
// shapes of the same dtype with at least min_gflop per call (the job's own
// well-performing GEMMs). A shape is reported when its best rank is below
// ratio × reference, provided at least max(slow_gpu.min_ranks, half the
// window's ranks) ran it; the alignment rule (analysis/gemm.h) explains why when
// a dimension is not a multiple of 64/128 elements.
#ifndef XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_
#define XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_

#include <map>
#include <string>

#include "engine/detectors/window_view.h"

namespace xpu::engine {

class UnoptimizedGemmDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "unoptimized_gemm"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  std::map<std::string, std::map<uint8_t, double>> best_;  // job -> dtype -> best shape TFLOPS
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_UNOPTIMIZED_GEMM_H_
