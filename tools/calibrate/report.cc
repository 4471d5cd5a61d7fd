#include "tools/calibrate/report.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace xpu::calibrate {

std::string GbPerS(double bytes_per_s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", bytes_per_s / 1e9);
  return b;
}

std::string SizeText(uint64_t b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB"};
  int i = 0;
  double v = static_cast<double>(b);
  while (v >= 1024 && i < 3) {
    v /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf),
                v == static_cast<double>(static_cast<uint64_t>(v)) ? "%.0f %s" : "%.1f %s", v,
                u[i]);
  return buf;
}

std::string CalibrationTable(const xpu::v1::CalibrationReport& r) {
  std::string s = absl::StrCat(r.gpu_model(), " x ", r.devices(), " on ", r.host());
  if (!r.cuda_runtime_version().empty())
    absl::StrAppend(&s, ", CUDA runtime ", r.cuda_runtime_version());
  if (!r.nccl_version().empty()) absl::StrAppend(&s, ", NCCL ", r.nccl_version());
  absl::StrAppend(&s, "\n");
  char line[160];
  if (r.gemm_size() > 0) {
    absl::StrAppend(&s, "\nGEMM peak (", r.gemm_library().empty() ? "cuBLAS" : r.gemm_library(),
                    ", m = n = k = ", r.gemm(0).m(), ")\n");
    std::snprintf(line, sizeof(line), "  %-6s %12s %16s %8s\n", "dtype", "TFLOPS", "slowest device",
                  "devices");
    absl::StrAppend(&s, line);
    for (const auto& g : r.gemm()) {
      std::snprintf(line, sizeof(line), "  %-6s %12.1f %16.1f %8u\n", g.dtype().c_str(), g.tflops(),
                    g.tflops_min(), g.devices());
      absl::StrAppend(&s, line);
    }
  }
  if (r.collectives_size() > 0) {
    absl::StrAppend(&s, "\nCollectives (", r.collectives(0).nranks(), " GPUs, ",
                    r.collectives(0).nodes(), " node, nccl-tests busbw)\n");
    std::snprintf(line, sizeof(line), "  %-14s %10s %12s %12s %12s\n", "op", "size", "time us",
                  "algbw GB/s", "busbw GB/s");
    absl::StrAppend(&s, line);
    for (const auto& c : r.collectives()) {
      std::snprintf(line, sizeof(line), "  %-14s %10s %12.1f %12s %12s\n", c.op().c_str(),
                    SizeText(c.bytes()).c_str(), c.time_us(),
                    GbPerS(c.algbw_bytes_per_second()).c_str(),
                    GbPerS(c.busbw_bytes_per_second()).c_str());
      absl::StrAppend(&s, line);
    }
  }
  return s;
}

json::Json CalibrationJson(const xpu::v1::CalibrationReport& r) {
  json::Json gemm = json::Json::array();
  for (const xpu::v1::GemmCalibration& g : r.gemm()) {
    gemm.push_back({{"dtype", g.dtype()},
                    {"tflops", g.tflops()},
                    {"tflops_min", g.tflops_min()},
                    {"m", g.m()},
                    {"n", g.n()},
                    {"k", g.k()},
                    {"iterations", g.iterations()},
                    {"devices", g.devices()}});
  }
  json::Json collectives = json::Json::array();
  for (const xpu::v1::CollectiveCalibration& c : r.collectives()) {
    collectives.push_back({{"op", c.op()},
                           {"bytes", c.bytes()},
                           {"nranks", c.nranks()},
                           {"nodes", c.nodes()},
                           {"time_us", c.time_us()},
                           {"algbw_bytes_per_second", c.algbw_bytes_per_second()},
                           {"busbw_bytes_per_second", c.busbw_bytes_per_second()},
                           {"iterations", c.iterations()}});
  }
  return {{"gpu_model", r.gpu_model()},
          {"host", r.host()},
          {"devices", r.devices()},
          {"measured_ns", r.measured_ns()},
          {"cuda_runtime_version", r.cuda_runtime_version()},
          {"nccl_version", r.nccl_version()},
          {"gemm_library", r.gemm_library()},
          {"gemm", std::move(gemm)},
          {"collectives", std::move(collectives)}};
}

}  // namespace xpu::calibrate
