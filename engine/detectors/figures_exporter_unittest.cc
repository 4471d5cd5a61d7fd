#include "engine/detectors/figures_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1, kGemm = 2, kAllReduce = 3, kLoader = 4;

// The value of the gauge `name` with exactly `labels`; NaN when absent.
double GaugeValue(prometheus::Registry& registry, const std::string& name,
                  const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> have;
      for (const auto& l : m.label) have[l.name] = l.value;
      if (have == labels) return m.gauge.value;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Two ranks, five 10 ms steps each: a 1 ms DataLoader call at the start of
// the step, a 4096^3 GEMM of 1 ms at 1.5 ms (issued 100 us ahead), a 16 MiB
// all-reduce between the two ranks of 2 ms at 3 ms (issued 50 us ahead).
class FiguresExporterTest : public ::testing::Test {
 protected:
  FiguresExporterTest() {
    for (int r = 0; r < 2; ++r) {
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      job_.Define(r, GemmSig(kGemm, 4096, 4096, 4096));
      job_.Define(r, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 8 << 20, 5, r, 2));
      job_.Define(r, HostSig(kLoader, XPU_OP_PY_DATALOADER));
      for (int s = 0; s <= 5; ++s) {
        const uint64_t t = kSec + s * 10 * kMs;
        job_.Add(r, Host(kStep, t, kUs, s));
        if (s == 5) break;
        job_.Add(r, Host(kLoader, t, kMs));
        job_.Add(r, Timed(kGemm, t + 1500 * kUs, kMs, s, 100 * kUs));
        job_.Add(r, Timed(kAllReduce, t + 3 * kMs, 2 * kMs, s, 50 * kUs, 2));
      }
    }
    job_.CloseWindow();
  }
  double Value(const std::string& name, std::map<std::string, std::string> labels) {
    labels["xpu_job"] = "job-1";
    labels["xpu_job_name"] = "gpt";
    labels["Hostname"] = "node0";  // TestJob puts ranks 0..3 on node0
    return GaugeValue(registry_, name, labels);
  }
  // Cumulative count of the issue-latency histogram bucket `le` (+Inf: the
  // total); -1 when the series is absent.
  double Bucket(const std::string& rank, const std::string& family, double le) {
    for (const prometheus::MetricFamily& f : registry_.Collect()) {
      if (f.name != "xpu_rank_issue_latency_seconds") continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        std::map<std::string, std::string> have;
        for (const auto& l : m.label) have[l.name] = l.value;
        if (have["rank"] != rank || have["family"] != family) continue;
        for (const auto& b : m.histogram.bucket) {
          if (b.upper_bound == le) return static_cast<double>(b.cumulative_count);
        }
        if (std::isinf(le)) return static_cast<double>(m.histogram.sample_count);
      }
    }
    return -1;
  }

  TestJob job_;
  prometheus::Registry registry_;
  JobSeries series_;
  FiguresExporter exporter_{std::make_shared<WindowViews>(), Config(), registry_, series_};
};

TEST_F(FiguresExporterTest, PublishesEachRanksFiguresAndNoDiagnosis) {
  EXPECT_TRUE(Diagnose(exporter_, job_).empty());
  for (const char* rank : {"0", "1"}) {
    SCOPED_TRACE(rank);
    EXPECT_DOUBLE_EQ(Value("xpu_rank_step_seconds", {{"rank", rank}}), 0.010);
    // 137.4 GFLOP in 1 ms.
    EXPECT_NEAR(Value("xpu_rank_gemm_flop_per_second", {{"rank", rank}}),
                2.0 * 4096 * 4096 * 4096 / 1e-3, 1);
    // 16 MiB x busbw factor 1 (two ranks) / 2 ms.
    EXPECT_NEAR(Value("xpu_rank_busbw_bytes_per_second", {{"rank", rank}}), 16777216 / 2e-3, 1);
    // Five GEMMs issued 100 us ahead, five all-reduces 50 us ahead: all in
    // (50 us, 250 us] and (25 us, 100 us] respectively.
    EXPECT_EQ(Bucket(rank, "compute", 5e-5), 0);
    EXPECT_EQ(Bucket(rank, "compute", 2.5e-4), 5);
    EXPECT_EQ(Bucket(rank, "compute", INFINITY), 5);
    EXPECT_EQ(Bucket(rank, "communication", 2.5e-5), 0);
    EXPECT_EQ(Bucket(rank, "communication", 1e-4), 5);
    EXPECT_EQ(Bucket(rank, "communication", INFINITY), 5);
    // The GPU idles from the end of the previous step's all-reduce (5 ms
    // into it) to the GEMM after the DataLoader call: 6.5 ms in 4 of the 5
    // steps (the first has no earlier GPU op in the window).
    EXPECT_NEAR(Value("xpu_rank_void_ratio", {{"rank", rank}, {"kind", "inter"}}), 0.52, 1e-9);
    EXPECT_DOUBLE_EQ(Value("xpu_rank_void_ratio", {{"rank", rank}, {"kind", "minority"}}), 0);
    EXPECT_NEAR(Value("xpu_rank_dataloader_ratio", {{"rank", rank}}), 0.1, 1e-9);
  }
}

TEST_F(FiguresExporterTest, SeriesKeepTheirValueUntilTheJobIsRetired) {
  Diagnose(exporter_, job_);
  job_.CloseWindow();  // a window without records
  Diagnose(exporter_, job_);
  EXPECT_DOUBLE_EQ(Value("xpu_rank_step_seconds", {{"rank", "0"}}), 0.010);
  // Samples accumulate: the second window had none.
  EXPECT_EQ(Bucket("0", "compute", INFINITY), 5);
  series_.RetireJob("job-1");
  EXPECT_TRUE(std::isnan(Value("xpu_rank_step_seconds", {{"rank", "0"}})));
  EXPECT_TRUE(std::isnan(Value("xpu_rank_gemm_flop_per_second", {{"rank", "1"}})));
  EXPECT_EQ(Bucket("0", "compute", INFINITY), -1);
  // A retired job's windows publish nothing.
  Diagnose(exporter_, job_);
  EXPECT_TRUE(std::isnan(Value("xpu_rank_step_seconds", {{"rank", "0"}})));
}

TEST_F(FiguresExporterTest, IssueLatencyHistogramAccumulatesAcrossWindows) {
  Diagnose(exporter_, job_);
  EXPECT_EQ(Bucket("1", "compute", INFINITY), 5);
  for (int s = 6; s <= 8; ++s) {
    job_.Add(1, Timed(kGemm, kSec + s * 10 * kMs, kMs, s, 2 * kMs));
  }
  job_.CloseWindow();
  Diagnose(exporter_, job_);
  EXPECT_EQ(Bucket("1", "compute", 2.5e-4), 5);
  EXPECT_EQ(Bucket("1", "compute", 2.5e-3), 8);
  EXPECT_EQ(Bucket("1", "compute", INFINITY), 8);
}

// A job of more ranks than figures.histogram_max_ranks: its issue latencies
// in one histogram per family (rank="all"), the per-rank ones made while it
// was smaller removed; the gauges stay per rank.
TEST_F(FiguresExporterTest, LargeJobsPoolTheirIssueLatencies) {
  Diagnose(exporter_, job_);
  EXPECT_EQ(Bucket("0", "compute", INFINITY), 5);
  FiguresExporter pooled(std::make_shared<WindowViews>(), Config({{"figures.histogram_max_ranks", 1}}),
                         registry_, series_);
  for (int r = 0; r < 2; ++r) job_.Add(r, Timed(kGemm, 2 * kSec, kMs, 9, 100 * kUs));
  job_.CloseWindow();
  Diagnose(pooled, job_);
  EXPECT_EQ(Bucket("0", "compute", INFINITY), -1);
  EXPECT_EQ(Bucket("1", "communication", INFINITY), -1);
  // Both ranks' samples in one histogram (this exporter's first view holds
  // the records of both windows: 6 GEMMs per rank).
  EXPECT_EQ(Bucket("all", "compute", INFINITY), 12);
  EXPECT_EQ(Bucket("all", "communication", INFINITY), 10);
  EXPECT_DOUBLE_EQ(Value("xpu_rank_step_seconds", {{"rank", "1"}}), 0.010);
}

// A job of more ranks than figures.gauge_max_ranks: the gauges of the ranks
// furthest below and above the median stay, the others go; each figure's
// spread is published; a rank that no longer stands out loses its gauges.
TEST(FiguresExporterLargeJobTest, ShowsOnlyTheRanksThatStandOut) {
  prometheus::Registry registry;
  JobSeries series;
  FiguresExporter exporter(std::make_shared<WindowViews>(),
                           Config({{"figures.gauge_max_ranks", 4}, {"figures.standout_ranks", 1}}),
                           registry, series);
  TestJob job;
  // Six ranks, five steps each; rank r's steps last 10 + r ms, rank 3's
  // 40 ms in the first window.
  auto play = [&](uint64_t from, int slow) {
    for (int r = 0; r < 6; ++r) {
      job.Define(r, HostSig(kStep, XPU_OP_STEP));
      const uint64_t step = (r == slow ? 40 : 10 + r) * kMs;
      for (int s = 0; s <= 5; ++s) job.Add(r, Host(kStep, from + s * step, kUs, s));
    }
    job.CloseWindow();
    EXPECT_TRUE(Diagnose(exporter, job).empty());
  };
  auto step_of = [&](const char* rank) {
    return GaugeValue(registry, "xpu_rank_step_seconds",
                      {{"xpu_job", "job-1"}, {"xpu_job_name", "gpt"}, {"rank", rank},
                       {"Hostname", std::string("node") + (rank[0] >= '4' ? "1" : "0")}});
  };
  auto spread = [&](const char* q) {
    return GaugeValue(registry, "xpu_job_rank_figure",
                      {{"xpu_job", "job-1"}, {"xpu_job_name", "gpt"}, {"figure", "step_seconds"},
                       {"stat", q}});
  };
  play(kSec, 3);
  // Lowest 0.010 (rank 0), highest 0.040 (rank 3).
  EXPECT_DOUBLE_EQ(step_of("0"), 0.010);
  EXPECT_DOUBLE_EQ(step_of("3"), 0.040);
  for (const char* r : {"1", "2", "4", "5"}) EXPECT_TRUE(std::isnan(step_of(r))) << r;
  EXPECT_DOUBLE_EQ(spread("min"), 0.010);
  EXPECT_DOUBLE_EQ(spread("max"), 0.040);
  EXPECT_GT(spread("median"), 0.010);
  EXPECT_LT(spread("median"), 0.040);
  // Rank 5 is the slowest now: rank 3 (13 ms) is in the middle and loses
  // its gauge.
  play(3 * kSec, -1);
  EXPECT_DOUBLE_EQ(step_of("5"), 0.015);
  EXPECT_DOUBLE_EQ(step_of("0"), 0.010);
  EXPECT_TRUE(std::isnan(step_of("3")));
  EXPECT_DOUBLE_EQ(spread("max"), 0.015);
}

}  // namespace
}  // namespace xpu::engine
