#include "common/analysis/stats.h"

#include <algorithm>
#include <cmath>

namespace xpu::analysis {

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

double Mad(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double m = Median(v);
  std::vector<double> d;
  d.reserve(v.size());
  for (double x : v) d.push_back(std::fabs(x - m));
  return Median(std::move(d));
}

std::vector<size_t> MadOutliers(const std::vector<double>& v, double k, Tail tail,
                                double min_rel_gap) {
  std::vector<size_t> out;
  if (v.size() < 3) return out;
  const double med = Median(v);
  const double mad = Mad(v);
  const double min_gap = min_rel_gap * std::fabs(med);
  for (size_t i = 0; i < v.size(); ++i) {
    double dev = tail == Tail::kHigh ? v[i] - med : med - v[i];
    if (dev <= 0) continue;
    if (dev > k * mad && dev > min_gap) out.push_back(i);
  }
  return out;
}

double KsDistance(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  while (i < a.size() && j < b.size()) {
    double x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= x) ++i;
    while (j < b.size() && b[j] <= x) ++j;
    d = std::max(d, std::fabs(static_cast<double>(i) / na - static_cast<double>(j) / nb));
  }
  return d;
}

double Wasserstein1(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  // Integrate |F_a - F_b| over the merged breakpoints.
  std::vector<double> xs(a);
  xs.insert(xs.end(), b.begin(), b.end());
  std::sort(xs.begin(), xs.end());
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  double w = 0;
  size_t i = 0, j = 0;
  for (size_t t = 0; t + 1 < xs.size(); ++t) {
    while (i < a.size() && a[i] <= xs[t]) ++i;
    while (j < b.size() && b[j] <= xs[t]) ++j;
    w += std::fabs(static_cast<double>(i) / na - static_cast<double>(j) / nb) * (xs[t + 1] - xs[t]);
  }
  return w;
}

}  // namespace xpu::analysis
