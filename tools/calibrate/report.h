// report — the calibration report (xpu.v1.CalibrationReport) as text and as
// JSON, shared by xpu-calibrate and `xpu calibrate` (which must not link the
// CUDA loader).
// Thread-safety: pure functions.
#ifndef XPU_TOOLS_CALIBRATE_REPORT_H_
#define XPU_TOOLS_CALIBRATE_REPORT_H_

#include <cstdint>
#include <string>

#include "common/json/json.h"
#include "xpu/v1/history.pb.h"

namespace xpu::calibrate {

// Human-readable table of a report: GEMM peaks, then collectives.
std::string CalibrationTable(const xpu::v1::CalibrationReport& r);
// The report as JSON: every field under its proto (snake_case) name, 64-bit
// integers as numbers, in field order: {gpu_model, host, devices,
// measured_ns, cuda_runtime_version, nccl_version, gemm_library,
// gemm: [{dtype, tflops, tflops_min, m, n, k, iterations, devices}],
// collectives: [{op, bytes, nranks, nodes, time_us, algbw_bytes_per_second,
// busbw_bytes_per_second, iterations}]}.
json::Json CalibrationJson(const xpu::v1::CalibrationReport& r);
// "12.34" (GB/s, 1e9 bytes per second)
std::string GbPerS(double bytes_per_s);
// "64 MiB", "1.5 GiB"
std::string SizeText(uint64_t bytes);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_REPORT_H_
