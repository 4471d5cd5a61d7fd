// stats — robust statistics shared by the analyses: median, MAD, quantiles,
// the median/MAD outlier rule (PerfTracker) and two distances between
// empirical distributions (Kolmogorov–Smirnov, Wasserstein-1).
// Pure functions; inputs are copied where they need sorting.
#ifndef XPU_COMMON_ANALYSIS_STATS_H_
#define XPU_COMMON_ANALYSIS_STATS_H_

#include <cstddef>
#include <vector>

namespace xpu::analysis {

double Mean(const std::vector<double>& v);  // 0 for empty
double Median(std::vector<double> v);       // 0 for empty; mean of the middle two
// Linear interpolation between closest ranks (q in [0,1]); 0 for empty.
double Quantile(std::vector<double> v, double q);
// The same of samples sorted ascending, without copying them.
double QuantileOfSorted(const std::vector<double>& sorted, double q);
double QuantileOfSorted(const std::vector<float>& sorted, double q);
// Median absolute deviation: median(|x - median(x)|).
double Mad(const std::vector<double>& v);

enum class Tail { kHigh, kLow };
// Indices i with v[i] beyond median ± k·MAD on the given side. When MAD is 0
// (most values equal), a value counts only if it differs from the median by
// more than min_rel_gap × |median|, so that identical peers never produce
// an outlier and one deviant among equals still does.
std::vector<size_t> MadOutliers(const std::vector<double>& v, double k, Tail tail,
                                double min_rel_gap = 0.05);

// Two-sample Kolmogorov–Smirnov statistic: sup |F_a(x) - F_b(x)|, in [0,1];
// 0 when either sample is empty.
double KsDistance(std::vector<double> a, std::vector<double> b);
// Wasserstein-1 (earth mover's) distance between the empirical
// distributions: the integral of |F_a - F_b|, in the unit of the samples.
double Wasserstein1(std::vector<double> a, std::vector<double> b);
// The same two distances of samples sorted ascending, without copying them.
double KsDistanceOfSorted(const std::vector<double>& a, const std::vector<double>& b);
// Against samples kept as floats (each compared as the double it widens to).
double KsDistanceOfSorted(const std::vector<double>& a, const std::vector<float>& b);
double Wasserstein1OfSorted(const std::vector<double>& a, const std::vector<double>& b);
// At most n of the sorted samples, evenly spaced by rank (the smallest and
// the largest among them): a summary whose distribution is within about
// 1/n of the samples' in the Kolmogorov–Smirnov sense. All of them when
// there are no more than n.
std::vector<double> EvenQuantiles(const std::vector<double>& sorted, size_t n);

// The samples of a pool without a sub-multiset of them ("the other ranks'
// samples" when the pool holds every rank's), answered without building the
// difference: O(|mine| log |pool|) per call instead of O(|pool|), so that
// comparing each of N ranks with the others stays O(N log N) overall.
// `pool` (every sample, sorted ascending) and `prefix` (PrefixSums(pool);
// read by Wasserstein1 only, may be empty otherwise) are shared by all
// queries; `mine` (sorted ascending) must be contained in
// the pool. KsDistance and Quantile give exactly what KsDistance(mine,
// others) and Quantile(others, q) give; Wasserstein1 is the same integral,
// summed in another order (equal up to floating-point rounding).
class PoolComplement {
 public:
  // `index` (PoolIndex(pool), optional) makes each search of a large pool
  // touch a few cache lines of it instead of one per halving.
  PoolComplement(const std::vector<double>& pool, const std::vector<double>& prefix,
                 const std::vector<double>& mine, const std::vector<double>* index = nullptr)
      : pool_(pool), prefix_(prefix), mine_(mine), index_(index) {}
  size_t size() const { return pool_.size() - mine_.size(); }
  double Quantile(double q) const;
  double KsDistance() const;
  double Wasserstein1() const;

 private:
  size_t PoolLe(double x) const;  // pool samples <= x
  size_t PoolLt(double x) const;  // pool samples < x
  // PoolLe(x) for `from` <= it, with the pool's samples before `from` <= x.
  size_t PoolLeFrom(size_t from, double x) const;
  double PoolIntegral(double u, double w) const;  // integral over [u, w] of PoolLe(x) dx
  double OtherAt(size_t k) const;                 // k-th smallest (0-based) of the others
  template <typename Bound>
  size_t Search(double x, Bound bound) const;  // bound(pool, x) - begin, through the index
  const std::vector<double>& pool_;
  const std::vector<double>& prefix_;
  const std::vector<double>& mine_;
  const std::vector<double>* index_;
};
// The Kolmogorov–Smirnov distance of each of several samples (each sorted
// ascending) to all the others' samples pooled: for each set what
// PoolComplement(pool, {}, *sets[i]).KsDistance() gives, bit for bit, from
// one sort of every sample tagged with its set and one pass over it, with
// no search of the pool per sample. A set that is empty, or whose others
// are, gets 0. `pool` (optional) gets every sample, sorted.
std::vector<double> KsDistancesToOthers(const std::vector<const std::vector<double>*>& sets,
                                        std::vector<double>* pool = nullptr);
// Every kPoolIndexStride-th sample of a sorted pool, for PoolComplement.
inline constexpr size_t kPoolIndexStride = 64;
std::vector<double> PoolIndex(const std::vector<double>& sorted);
// prefix[i] = sum of sorted[0..i) (size n + 1).
std::vector<double> PrefixSums(const std::vector<double>& sorted);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_STATS_H_
