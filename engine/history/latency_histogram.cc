#include "engine/history/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace xpu::engine::history {

int LatencyHistogram::BucketOf(double us) {
  if (!(us >= 1.0)) return 0;  // also NaN and negatives
  const int i = 1 + static_cast<int>(std::floor(std::log10(us) * kPerDecade));
  return std::min(i, kBuckets - 1);
}

double LatencyHistogram::LowerEdgeUs(int i) {
  if (i <= 0) return 0;
  return std::pow(10.0, static_cast<double>(i - 1) / kPerDecade);
}

void LatencyHistogram::Add(double us, uint64_t n) {
  counts_[BucketOf(us)] += n;
  total_ += n;
}

void LatencyHistogram::AddAll(const std::vector<double>& us) {
  for (double v : us) Add(v);
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  total_ += o.total_;
}

void LatencyHistogram::Set(int bucket, uint64_t count) {
  if (bucket < 0 || bucket >= kBuckets) return;
  total_ = total_ - counts_[bucket] + count;
  counts_[bucket] = count;
}

double LatencyHistogram::QuantileUs(double q) const {
  if (total_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double target = q * static_cast<double>(total_);
  double below = 0;
  for (int i = 0; i < kBuckets; ++i) {
    const double c = static_cast<double>(counts_[i]);
    if (c > 0 && below + c >= target) {
      const double frac = (target - below) / c;
      if (i == 0) return frac;  // [0, 1) µs, linear
      const double lo = LowerEdgeUs(i);
      if (i == kBuckets - 1) return lo;  // open-ended last bucket
      const double hi = LowerEdgeUs(i + 1);
      return lo * std::pow(hi / lo, frac);
    }
    below += c;
  }
  return LowerEdgeUs(kBuckets - 1);
}

double KsDistance(const std::vector<double>& samples_us, const LatencyHistogram& h) {
  if (samples_us.empty() || h.empty()) return 0;
  LatencyHistogram s;
  s.AddAll(samples_us);
  double fa = 0, fb = 0, d = 0;
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    fa += static_cast<double>(s.count(i)) / static_cast<double>(s.total());
    fb += static_cast<double>(h.count(i)) / static_cast<double>(h.total());
    d = std::max(d, std::fabs(fa - fb));
  }
  return d;
}

}  // namespace xpu::engine::history
