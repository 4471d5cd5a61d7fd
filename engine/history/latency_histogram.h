// latency_histogram — issue latencies of previous runs, kept as counts in
// fixed log-scale buckets so that any number of samples fits in a few dozen
// SQLite rows and histograms of different runs add up bucket by bucket.
//
// Buckets (µs): bucket 0 holds [0, 1); bucket i (1 <= i < kBuckets - 1)
// holds [10^((i-1)/4), 10^(i/4)), four per decade, up to 10^7 µs (10 s);
// the last bucket holds everything from 10 s on. Negative samples (clock
// mapping noise) count in bucket 0. The bucket layout is part of the stored
// data: never change it, add a new family of buckets instead.
//
// Comparisons with a window's raw samples run on the same grid: the KS
// distance is the largest difference of the two CDFs at the bucket edges (a
// lower bound of the exact statistic, within one bucket width), the median
// interpolates log-linearly inside its bucket.
// Thread-safety: a value type.
#ifndef XPU_ENGINE_HISTORY_LATENCY_HISTOGRAM_H_
#define XPU_ENGINE_HISTORY_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>
#include <vector>

namespace xpu::engine::history {

class LatencyHistogram {
 public:
  static constexpr int kPerDecade = 4;
  static constexpr int kBuckets = 2 + 7 * kPerDecade;  // [0,1) µs, 28 log buckets, >= 10 s

  static int BucketOf(double us);
  // Lower edge of bucket i in µs (0 for bucket 0).
  static double LowerEdgeUs(int i);

  void Add(double us, uint64_t n = 1);
  void AddAll(const std::vector<double>& us);
  void Merge(const LatencyHistogram& o);
  void Set(int bucket, uint64_t count);  // out-of-range buckets are ignored
  uint64_t count(int bucket) const { return counts_[bucket]; }
  uint64_t total() const { return total_; }
  bool empty() const { return total_ == 0; }
  // Quantile q in [0,1], log-linear inside the bucket; 0 when empty.
  double QuantileUs(double q) const;
  double MedianUs() const { return QuantileUs(0.5); }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

// KS distance between raw samples (µs) and a histogram, on the bucket grid;
// 0 when either is empty.
double KsDistance(const std::vector<double>& samples_us, const LatencyHistogram& h);

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_LATENCY_HISTOGRAM_H_
