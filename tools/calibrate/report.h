// report — the calibration report (xpu.v1.CalibrationReport) as text, shared
// by xpu-calibrate and `xpu calibrate` (which must not link the CUDA loader).
// Thread-safety: pure functions.
#ifndef XPU_TOOLS_CALIBRATE_REPORT_H_
#define XPU_TOOLS_CALIBRATE_REPORT_H_

#include <cstdint>
#include <string>

#include "xpu/v1/xpu.pb.h"

namespace xpu::calibrate {

// Human-readable table of a report: GEMM peaks, then collectives.
std::string CalibrationTable(const xpu::v1::CalibrationReport& r);
// "12.34" (GB/s, 1e9 bytes per second)
std::string GbPerS(double bytes_per_s);
// "64 MiB", "1.5 GiB"
std::string SizeText(uint64_t bytes);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_REPORT_H_
