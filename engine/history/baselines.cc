#include "engine/history/baselines.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/analysis/stats.h"
#include "xpu/record.h"

namespace xpu::engine::history {
namespace {

void AddFigure(std::map<std::string, std::vector<double>>* m, const std::string& k, double v) {
  if (v > 0) (*m)[k].push_back(v);
}

HistoryFigure MedianFigure(const std::vector<double>& v) {
  HistoryFigure f;
  if (v.empty()) return f;
  f.value = analysis::Median(v);
  f.runs = static_cast<int>(v.size());
  return f;
}

}  // namespace

std::string Bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(b, " B");
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string CollectiveShape::Describe() const {
  return absl::StrCat(op, " of ", Bytes(bytes), ", ", nranks, " ranks on ", nodes,
                      nodes == 1 ? " node" : " nodes");
}

std::string HistoryBaseline::Describe(int figure_runs) const {
  return absl::StrCat(figure_runs, figure_runs == 1 ? " previous run" : " previous runs",
                      " of job '", job_name, "' on ",
                      gpu_model.empty() ? "an unreported GPU model" : gpu_model);
}

HistoryBaseline CombineRuns(const std::vector<RunBaseline>& runs) {
  HistoryBaseline h;
  if (runs.empty()) return h;
  h.job_name = runs.front().job_name;
  h.gpu_model = runs.front().gpu_model;
  h.runs = static_cast<int>(runs.size());
  std::vector<double> step_med, step_best, vi, vm;
  std::map<std::string, std::vector<double>> gemm;
  std::map<CollectiveShape, std::vector<double>> bw;
  for (const RunBaseline& r : runs) {
    if (r.step_median_s > 0) step_med.push_back(r.step_median_s);
    if (r.step_best_s > 0) step_best.push_back(r.step_best_s);
    if (r.void_inter >= 0) vi.push_back(r.void_inter);
    if (r.void_minority >= 0) vm.push_back(r.void_minority);
    for (const auto& [k, g] : r.gemm) AddFigure(&gemm, k, g.tflops);
    for (const auto& [s, b] : r.busbw) {
      if (b.busbw > 0) bw[s].push_back(b.busbw);
    }
    for (const auto& [family, hist] : r.issue_latency) {
      if (hist.empty()) continue;
      h.issue_latency[family].Merge(hist);
      h.issue_latency_runs[family]++;
    }
  }
  h.step_median_s = MedianFigure(step_med);
  if (!step_best.empty()) {
    h.step_best_s.value = *std::min_element(step_best.begin(), step_best.end());
    h.step_best_s.runs = static_cast<int>(step_best.size());
  }
  h.void_inter = MedianFigure(vi);
  h.void_minority = MedianFigure(vm);
  for (const auto& [k, v] : gemm) h.gemm_tflops[k] = MedianFigure(v);
  for (const auto& [s, v] : bw) h.busbw[s] = MedianFigure(v);
  return h;
}

const GemmCalibrationRow* Calibration::Gemm(const std::string& dtype) const {
  auto it = gemm.find(dtype);
  return it == gemm.end() || it->second.tflops <= 0 ? nullptr : &it->second;
}

std::optional<double> Calibration::BusBw(const CollectiveShape& s, std::string* how) const {
  // Best calibrated busbw per size for this op / ranks / nodes.
  std::map<uint64_t, const CollectiveCalibrationRow*> points;
  for (const CollectiveCalibrationRow& c : collectives) {
    if (c.shape.op != s.op || c.shape.nranks != s.nranks || c.shape.nodes != s.nodes ||
        c.busbw <= 0)
      continue;
    const CollectiveCalibrationRow*& p = points[c.shape.bytes];
    if (p == nullptr || c.busbw > p->busbw) p = &c;
  }
  if (points.empty() || s.bytes < points.begin()->first || s.bytes > points.rbegin()->first)
    return std::nullopt;
  auto hi = points.lower_bound(s.bytes);
  double v;
  if (hi->first == s.bytes) {
    v = hi->second->busbw;
  } else {
    auto lo = std::prev(hi);
    const double x0 = std::log(static_cast<double>(lo->first)),
                 x1 = std::log(static_cast<double>(hi->first));
    const double y0 = std::log(lo->second->busbw), y1 = std::log(hi->second->busbw);
    const double t = (std::log(static_cast<double>(s.bytes)) - x0) / (x1 - x0);
    v = std::exp(y0 + t * (y1 - y0));
  }
  if (how != nullptr) {
    *how = absl::StrCat("xpu calibrate on ", hi->second->host, ", ", s.op, " ", s.nranks, " ranks");
  }
  return v;
}

Calibration CombineCalibration(const std::string& gpu_model, const CalibrationRows& rows) {
  Calibration c;
  c.gpu_model = gpu_model;
  for (const GemmCalibrationRow& g : rows.gemm) {
    if (g.gpu_model != gpu_model) continue;
    auto it = c.gemm.find(g.dtype);
    if (it == c.gemm.end() || g.tflops > it->second.tflops) c.gemm[g.dtype] = g;
  }
  for (const CollectiveCalibrationRow& r : rows.collectives) {
    if (r.gpu_model == gpu_model) c.collectives.push_back(r);
  }
  return c;
}

std::string StableGemmKey(const analysis::OpSig& s) {
  std::string dt = GemmDtypeClass(s.dtype);
  if (dt.empty()) dt = absl::StrCat("dt", s.dtype);
  return absl::StrCat("gemm ", dt, " m=", s.m, " n=", s.n, " k=", s.k, " b=", std::max(1u, s.batch),
                      " ", (s.gemm_flags & XPU_GEMM_TRANSA) ? "T" : "N",
                      (s.gemm_flags & XPU_GEMM_TRANSB) ? "T" : "N");
}

std::string GemmDtypeClass(uint8_t dtype) {
  switch (dtype) {
    case XPU_DT_BF16:
      return "bf16";
    case XPU_DT_F16:
      return "fp16";
    case XPU_DT_F32:
      return "fp32";
    case XPU_DT_F8_E4M3:
    case XPU_DT_F8_E5M2:
      return "fp8";
    default:
      return "";
  }
}

}  // namespace xpu::engine::history
