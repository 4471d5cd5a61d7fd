#include "common/analysis/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace xpu::analysis {

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return QuantileOfSorted(v, q);
}

namespace {

template <typename T>
double QuantileOf(const std::vector<T>& v, double q) {
  if (v.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  double frac = pos - static_cast<double>(lo);
  const double vlo = v[lo], vhi = v[hi];
  return vlo + (vhi - vlo) * frac;
}

template <typename B>
double KsOf(const std::vector<double>& a, const std::vector<B>& b) {
  if (a.empty() || b.empty()) return 0;
  size_t i = 0, j = 0;
  double d = 0;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  while (i < a.size() && j < b.size()) {
    double x = std::min<double>(a[i], b[j]);
    while (i < a.size() && a[i] <= x) ++i;
    while (j < b.size() && b[j] <= x) ++j;
    d = std::max(d, std::fabs(static_cast<double>(i) / na - static_cast<double>(j) / nb));
  }
  return d;
}

}  // namespace

double QuantileOfSorted(const std::vector<double>& v, double q) { return QuantileOf(v, q); }
double QuantileOfSorted(const std::vector<float>& v, double q) { return QuantileOf(v, q); }

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
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return KsDistanceOfSorted(a, b);
}

double KsDistanceOfSorted(const std::vector<double>& a, const std::vector<double>& b) {
  return KsOf(a, b);
}
double KsDistanceOfSorted(const std::vector<double>& a, const std::vector<float>& b) {
  return KsOf(a, b);
}

double Wasserstein1(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return Wasserstein1OfSorted(a, b);
}

double Wasserstein1OfSorted(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) return 0;
  // Integrate |F_a - F_b| over the merged breakpoints.
  std::vector<double> xs(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), xs.begin());
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

std::vector<double> EvenQuantiles(const std::vector<double>& sorted, size_t n) {
  if (sorted.size() <= n) return sorted;
  std::vector<double> out;
  if (n == 0) return out;
  out.reserve(n);
  const double last = static_cast<double>(sorted.size() - 1);
  for (size_t k = 0; k < n; ++k) {
    const double pos = n == 1 ? 0.0 : last * static_cast<double>(k) / static_cast<double>(n - 1);
    out.push_back(sorted[static_cast<size_t>(std::lround(pos))]);
  }
  return out;
}

std::vector<double> KsDistancesToOthers(const std::vector<const std::vector<double>*>& sets,
                                        std::vector<double>* pool) {
  struct Tagged {
    double v;
    uint32_t set;
  };
  size_t total = 0;
  std::vector<size_t> sizes(sets.size());  // read per sample: no pointer to follow
  for (size_t k = 0; k < sets.size(); ++k) total += sizes[k] = sets[k]->size();
  std::vector<Tagged> all;
  all.reserve(total);
  for (size_t k = 0; k < sets.size(); ++k) {
    for (double v : *sets[k]) all.push_back({v, static_cast<uint32_t>(k)});
  }
  std::sort(all.begin(), all.end(), [](const Tagged& a, const Tagged& b) { return a.v < b.v; });
  std::vector<double> d(sets.size(), 0.0);
  std::vector<size_t> below(sets.size(), 0);  // each set's samples before the value
  for (size_t from = 0; from < all.size();) {
    // The value's run: the pool has `from` samples below it, `to` up to it;
    // each set's samples in it together.
    size_t to = from + 1;
    while (to < all.size() && all[to].v == all[from].v) ++to;
    if (to - from > 1) {
      std::sort(all.begin() + static_cast<long>(from), all.begin() + static_cast<long>(to),
                [](const Tagged& a, const Tagged& b) { return a.set < b.set; });
    }
    for (size_t a = from; a < to;) {
      const uint32_t k = all[a].set;
      size_t b = a;
      while (b < to && all[b].set == k) ++b;
      const size_t mine = sizes[k], others = total - mine;
      const size_t i = below[k], j = i + (b - a);
      below[k] = j;
      a = b;
      if (others == 0) continue;
      // The figures PoolComplement::KsDistance takes at this value.
      const double na = static_cast<double>(mine), nb = static_cast<double>(others);
      d[k] = std::max(d[k],
                      std::fabs(static_cast<double>(i) / na - static_cast<double>(from - i) / nb));
      d[k] =
          std::max(d[k], std::fabs(static_cast<double>(j) / na - static_cast<double>(to - j) / nb));
    }
    from = to;
  }
  if (pool != nullptr) {
    pool->clear();
    pool->reserve(all.size());
    for (const Tagged& t : all) pool->push_back(t.v);
  }
  return d;
}

std::vector<double> PrefixSums(const std::vector<double>& sorted) {
  std::vector<double> p(sorted.size() + 1, 0);
  for (size_t i = 0; i < sorted.size(); ++i) p[i + 1] = p[i] + sorted[i];
  return p;
}

std::vector<double> PoolIndex(const std::vector<double>& sorted) {
  std::vector<double> index;
  index.reserve(sorted.size() / kPoolIndexStride + 1);
  for (size_t i = 0; i < sorted.size(); i += kPoolIndexStride) index.push_back(sorted[i]);
  return index;
}

template <typename Bound>
size_t PoolComplement::Search(double x, Bound bound) const {
  if (index_ == nullptr || index_->empty()) {
    return static_cast<size_t>(bound(pool_.begin(), pool_.end(), x) - pool_.begin());
  }
  // Blocks whose first sample is before x's place (by the same bound): the
  // place is inside the last of them, or at the next block's start. The
  // index is small enough to stay in cache; one block is a few lines.
  const size_t b = static_cast<size_t>(bound(index_->begin(), index_->end(), x) - index_->begin());
  if (b == 0) return 0;
  const size_t from = (b - 1) * kPoolIndexStride;
  const size_t to = std::min(b * kPoolIndexStride, pool_.size());
  return static_cast<size_t>(
      bound(pool_.begin() + static_cast<long>(from), pool_.begin() + static_cast<long>(to), x) -
      pool_.begin());
}

size_t PoolComplement::PoolLe(double x) const {
  return Search(x, [](auto a, auto b, double v) { return std::upper_bound(a, b, v); });
}

size_t PoolComplement::PoolLt(double x) const {
  return Search(x, [](auto a, auto b, double v) { return std::lower_bound(a, b, v); });
}

size_t PoolComplement::PoolLeFrom(size_t from, double x) const {
  // Galloping from `from`: a run of samples equal to x is usually short and
  // in the cache lines just read; a long one costs its logarithm.
  size_t lo = from, step = 1;
  while (lo + step <= pool_.size() && pool_[lo + step - 1] <= x) {
    lo += step;
    step *= 2;
  }
  const size_t hi = std::min(lo + step, pool_.size());
  return static_cast<size_t>(std::upper_bound(pool_.begin() + static_cast<long>(lo),
                                              pool_.begin() + static_cast<long>(hi), x) -
                             pool_.begin());
}

double PoolComplement::OtherAt(size_t k) const {
  // The smallest pool value x with #others <= x > k; others <= x is
  // PoolLe(x) - #mine <= x, non-decreasing along the sorted pool. It is at
  // a place from k (where it is not, pool_[k] has the same value: k + 1
  // samples are <= it) to k + |mine| (k + |mine| + 1 samples are <= that
  // one, at most |mine| of them mine).
  size_t lo = std::min(k, pool_.size() - 1);
  size_t hi = std::min(k + mine_.size(), pool_.size() - 1);
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const double x = pool_[mid];
    const size_t mine_le =
        static_cast<size_t>(std::upper_bound(mine_.begin(), mine_.end(), x) - mine_.begin());
    if (PoolLeFrom(mid, x) - mine_le > k) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return pool_[lo];
}

double PoolComplement::Quantile(double q) const {
  const size_t n = size();
  if (n == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(n - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, n - 1);
  const double frac = pos - static_cast<double>(lo);
  const double vlo = OtherAt(lo), vhi = hi == lo ? vlo : OtherAt(hi);
  return vlo + (vhi - vlo) * frac;
}

double PoolComplement::KsDistance() const {
  // sup |F_mine - F_others| is reached at a value of `mine` or just before
  // one: between two of mine's values F_mine is flat and F_others rises.
  // The figures are the same counts divided as analysis::KsDistance does.
  if (mine_.empty() || size() == 0) return 0;
  const double na = static_cast<double>(mine_.size()), nb = static_cast<double>(size());
  double d = 0;
  size_t i = 0;
  while (i < mine_.size()) {
    const double v = mine_[i];
    size_t j = i;
    while (j < mine_.size() && mine_[j] <= v) ++j;
    // One search per value: the pool's samples equal to v follow the first
    // of them, in the cache lines that search read last.
    const size_t lt = PoolLt(v);
    const size_t le = PoolLeFrom(lt, v);
    const size_t others_lt = lt - i, others_le = le - j;
    d = std::max(d, std::fabs(static_cast<double>(i) / na - static_cast<double>(others_lt) / nb));
    d = std::max(d, std::fabs(static_cast<double>(j) / na - static_cast<double>(others_le) / nb));
    i = j;
  }
  return d;
}

double PoolComplement::PoolIntegral(double u, double w) const {
  if (w <= u) return 0;
  const size_t pu = PoolLe(u), pw = PoolLe(w);
  return static_cast<double>(pu) * (w - u) + static_cast<double>(pw - pu) * w -
         (prefix_[pw] - prefix_[pu]);
}

double PoolComplement::Wasserstein1() const {
  if (mine_.empty() || size() == 0) return 0;
  const double na = static_cast<double>(mine_.size()), nb = static_cast<double>(size());
  // On [u, w) F_mine is c and mine has `a` samples <= x, so F_others(x) =
  // (PoolLe(x) - a) / nb, rising; |c - F_others| splits where it crosses c.
  auto piece = [&](double u, double w, double c, size_t a) {
    if (w <= u) return 0.0;
    const double target = static_cast<double>(a) + c * nb;  // PoolLe(x) >= target: above c
    size_t k = static_cast<size_t>(std::ceil(target - 1e-9));
    double cross = w;
    if (k == 0) {
      cross = u;
    } else if (k <= pool_.size()) {
      cross = std::clamp(pool_[k - 1], u, w);
    }
    const double below =
        c * (cross - u) - (PoolIntegral(u, cross) - static_cast<double>(a) * (cross - u)) / nb;
    const double above =
        (PoolIntegral(cross, w) - static_cast<double>(a) * (w - cross)) / nb - c * (w - cross);
    return below + above;
  };
  double total = piece(pool_.front(), mine_.front(), 0, 0);
  size_t i = 0;
  while (i < mine_.size()) {
    size_t j = i;
    while (j < mine_.size() && mine_[j] <= mine_[i]) ++j;
    const double next = j < mine_.size() ? mine_[j] : pool_.back();
    total += piece(mine_[i], next, static_cast<double>(j) / na, j);
    i = j;
  }
  return total;
}

}  // namespace xpu::analysis
