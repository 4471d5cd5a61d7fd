// gemm_bench — peak GEMM throughput of one device for one dtype: a square
// m = n = k GEMM (A transposed, the layout FP8 requires on Hopper), inputs
// filled with uniform random values in [-1, 1] (zeros would let the GPU
// clock higher than real data does), `warmup` untimed calls, then `iters`
// calls between two CUDA events on one stream:
//     TFLOPS = 2 · n³ · iters / elapsed / 1e12.
// cuBLASLt when loaded (the heuristic's first algorithm, 32 MiB workspace),
// else cublasGemmEx (no FP8).
// dtypes: bf16, fp16 (FP32 accumulate), tf32 (FP32 data, TF32 tensor cores),
// fp32 (plain FP32), fp8 (E4M3 inputs, BF16 output; compute capability 8.9+).
// Thread-safety: one call at a time per device.
#ifndef XPU_TOOLS_CALIBRATE_GEMM_BENCH_H_
#define XPU_TOOLS_CALIBRATE_GEMM_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tools/calibrate/cuda_libs.h"

namespace xpu::calibrate {

struct GemmResult {
  double tflops = 0;
  double ms_per_call = 0;
};

// NOT_FOUND / UNIMPLEMENTED when the dtype cannot run here (no library, no
// FP8 support): the caller reports it as skipped, not as a failure.
absl::StatusOr<GemmResult> MeasureGemm(const CudaLibs& libs, int device, const std::string& dtype,
                                       uint32_t n, int warmup, int iters);

// True for the names above.
bool KnownGemmDtype(const std::string& dtype);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_GEMM_BENCH_H_
