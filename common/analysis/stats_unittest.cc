#include "common/analysis/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace xpu::analysis {
namespace {

TEST(StatsTest, MedianMadQuantile) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  // |x - 2| = {1, 0, 1, 8} -> median 1.
  EXPECT_DOUBLE_EQ(Mad({1, 2, 3, 10}), 1);
  EXPECT_DOUBLE_EQ(Quantile({0, 10, 20, 30, 40}, 0.9), 36);
  EXPECT_DOUBLE_EQ(Mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

TEST(StatsTest, MadOutliersFindsTheDeviantOnlyOnItsSide) {
  // median 100, MAD 1: 50 is 50 below (> 5 MAD), 103 is 3 above.
  std::vector<double> v = {100, 99, 101, 100, 50, 103, 100, 99};
  EXPECT_EQ(MadOutliers(v, 5, Tail::kLow), (std::vector<size_t>{4}));
  EXPECT_TRUE(MadOutliers(v, 5, Tail::kHigh).empty());
}

TEST(StatsTest, MadOutliersWithZeroMad) {
  std::vector<double> equal = {10, 10, 10, 10, 10, 10, 10, 10};
  EXPECT_TRUE(MadOutliers(equal, 5, Tail::kLow).empty());
  std::vector<double> one = {10, 10, 10, 5, 10, 10, 10, 10};
  EXPECT_EQ(MadOutliers(one, 5, Tail::kLow), (std::vector<size_t>{3}));
  // Within the relative gap: not an outlier.
  std::vector<double> tiny = {10, 10, 10, 9.9, 10, 10, 10, 10};
  EXPECT_TRUE(MadOutliers(tiny, 5, Tail::kLow).empty());
}

TEST(StatsTest, KolmogorovSmirnov) {
  EXPECT_DOUBLE_EQ(KsDistance({1, 2, 3}, {1, 2, 3}), 0);
  EXPECT_DOUBLE_EQ(KsDistance({1, 2}, {10, 20}), 1);
  // F_a jumps to 0.5 at 1 and 1 at 3; F_b to 0.5 at 2 and 1 at 4: sup 0.5.
  EXPECT_DOUBLE_EQ(KsDistance({1, 3}, {2, 4}), 0.5);
  EXPECT_DOUBLE_EQ(KsDistance({}, {1}), 0);
}

TEST(StatsTest, Wasserstein) {
  // Shifting every sample by 5 moves the distribution by 5.
  EXPECT_DOUBLE_EQ(Wasserstein1({1, 2, 3}, {6, 7, 8}), 5);
  EXPECT_DOUBLE_EQ(Wasserstein1({1, 2, 3}, {1, 2, 3}), 0);
  // {0, 10} vs {0, 0}: half the mass moves by 10 -> 5.
  EXPECT_DOUBLE_EQ(Wasserstein1({0, 10}, {0, 0}), 5);
}

// The figures of sorted samples are those of the copying forms.
TEST(StatsTest, SortedFormsEqualTheCopyingOnes) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> value(0, 40);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> a(1 + rng() % 50), b(1 + rng() % 50);
    for (double& x : a) x = value(rng);
    for (double& x : b) x = value(rng);
    const double ks = KsDistance(a, b), w1 = Wasserstein1(a, b), q = Quantile(a, 0.3);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_DOUBLE_EQ(KsDistanceOfSorted(a, b), ks);
    EXPECT_DOUBLE_EQ(Wasserstein1OfSorted(a, b), w1);
    EXPECT_DOUBLE_EQ(QuantileOfSorted(a, 0.3), q);
    // Samples kept as floats: the figures of the doubles they widen to.
    const std::vector<float> bf(b.begin(), b.end());
    EXPECT_EQ(KsDistanceOfSorted(a, bf), KsDistanceOfSorted(a, b));
    EXPECT_EQ(QuantileOfSorted(bf, 0.3), QuantileOfSorted(b, 0.3));
  }
}

// EvenQuantiles keeps the ends and stays within about 1/n of the samples'
// distribution; few samples are kept whole.
TEST(StatsTest, EvenQuantilesSummarizeTheSamples) {
  EXPECT_EQ(EvenQuantiles({1, 2, 3}, 5), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(EvenQuantiles({1, 2, 3, 4, 5}, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_TRUE(EvenQuantiles({1, 2}, 0).empty());
  std::mt19937 rng(5);
  std::lognormal_distribution<double> latency(3.0, 1.0);
  for (size_t n : {16, 64, 256}) {
    std::vector<double> v(5000);
    for (double& x : v) x = latency(rng);
    std::sort(v.begin(), v.end());
    const std::vector<double> q = EvenQuantiles(v, n);
    ASSERT_EQ(q.size(), n);
    EXPECT_EQ(q.front(), v.front());
    EXPECT_EQ(q.back(), v.back());
    EXPECT_TRUE(std::is_sorted(q.begin(), q.end()));
    EXPECT_LE(KsDistanceOfSorted(q, v), 1.0 / static_cast<double>(n)) << n;
  }
}

// KsDistancesToOthers gives each set what PoolComplement's KsDistance
// gives it, bit for bit, and the sorted pool; random sets with many ties,
// some empty.
TEST(StatsTest, KsDistancesToOthersEqualThePoolComplements) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<double>> sets(1 + rng() % 10);
    std::vector<double> all;
    for (std::vector<double>& s : sets) {
      s.resize(rng() % 30);
      for (double& x : s) x = static_cast<double>(rng() % 25) * 0.5;
      std::sort(s.begin(), s.end());
      all.insert(all.end(), s.begin(), s.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<const std::vector<double>*> ptrs;
    for (const std::vector<double>& s : sets) ptrs.push_back(&s);
    std::vector<double> pool;
    const std::vector<double> d = KsDistancesToOthers(ptrs, &pool);
    EXPECT_EQ(pool, all);
    ASSERT_EQ(d.size(), sets.size());
    for (size_t k = 0; k < sets.size(); ++k) {
      EXPECT_EQ(d[k], PoolComplement(all, {}, sets[k]).KsDistance()) << trial << " " << k;
    }
  }
}

// PoolComplement answers for "the pool without mine" what the explicit
// difference answers: the same KS statistic and quantiles bit for bit, the
// same W1 up to rounding. Random pools with many ties (integer samples);
// through a PoolIndex (pools of up to 6 of its blocks), the same figures.
TEST(StatsTest, PoolComplementEqualsTheExplicitOthers) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int ranks = 2 + static_cast<int>(rng() % 12);
    std::vector<std::vector<double>> per_rank(static_cast<size_t>(ranks));
    std::vector<double> pool;
    for (auto& v : per_rank) {
      const int n = static_cast<int>(rng() % 30);
      const int spread = 1 + static_cast<int>(rng() % 50);
      const int shift = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) v.push_back(static_cast<double>(shift + rng() % spread));
      pool.insert(pool.end(), v.begin(), v.end());
    }
    std::sort(pool.begin(), pool.end());
    const std::vector<double> prefix = PrefixSums(pool);
    const std::vector<double> index = PoolIndex(pool);
    for (int i = 0; i < ranks; ++i) {
      std::vector<double> others;
      for (int j = 0; j < ranks; ++j) {
        if (j != i) others.insert(others.end(), per_rank[j].begin(), per_rank[j].end());
      }
      std::vector<double> mine = per_rank[static_cast<size_t>(i)];
      std::sort(mine.begin(), mine.end());
      PoolComplement pc(pool, prefix, mine);
      ASSERT_EQ(pc.size(), others.size());
      EXPECT_EQ(pc.KsDistance(), KsDistance(mine, others)) << trial << "/" << i;
      for (double q : {0.0, 0.1, 0.5, 0.9, 1.0}) {
        EXPECT_EQ(pc.Quantile(q), Quantile(others, q)) << trial << "/" << i << " q " << q;
      }
      EXPECT_NEAR(pc.Wasserstein1(), Wasserstein1(mine, others), 1e-9 * (1 + pool.back()))
          << trial << "/" << i;
      PoolComplement indexed(pool, prefix, mine, &index);
      EXPECT_EQ(indexed.KsDistance(), pc.KsDistance()) << trial << "/" << i;
      for (double q : {0.0, 0.1, 0.5, 0.9, 1.0}) EXPECT_EQ(indexed.Quantile(q), pc.Quantile(q));
      EXPECT_EQ(indexed.Wasserstein1(), pc.Wasserstein1()) << trial << "/" << i;
    }
  }
}

// Long runs of equal samples (a latency the clock rounds to one value on
// thousands of calls): the same figures as the explicit others.
TEST(StatsTest, PoolComplementWithLongRunsOfEqualSamples) {
  std::vector<std::vector<double>> per_rank = {
      std::vector<double>(3000, 5.0), std::vector<double>(2000, 5.0), {}};
  for (int i = 0; i < 700; ++i) per_rank[1].push_back(i % 7);
  for (int i = 0; i < 900; ++i) per_rank[2].push_back(i % 2 ? 5.0 : 9.0);
  std::vector<double> pool;
  for (const auto& v : per_rank) pool.insert(pool.end(), v.begin(), v.end());
  std::sort(pool.begin(), pool.end());
  const std::vector<double> prefix = PrefixSums(pool);
  const std::vector<double> index = PoolIndex(pool);
  for (size_t i = 0; i < per_rank.size(); ++i) {
    std::vector<double> others;
    for (size_t j = 0; j < per_rank.size(); ++j) {
      if (j != i) others.insert(others.end(), per_rank[j].begin(), per_rank[j].end());
    }
    std::vector<double> mine = per_rank[i];
    std::sort(mine.begin(), mine.end());
    const PoolComplement pc(pool, prefix, mine, &index);
    EXPECT_EQ(pc.KsDistance(), KsDistance(mine, others)) << i;
    for (double q : {0.0, 0.3, 0.5, 0.99, 1.0}) {
      EXPECT_EQ(pc.Quantile(q), Quantile(others, q)) << i << " q " << q;
    }
  }
}

}  // namespace
}  // namespace xpu::analysis
