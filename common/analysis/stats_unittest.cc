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
