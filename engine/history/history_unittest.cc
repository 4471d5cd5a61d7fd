// Units of engine/history: the log-scale latency histogram, combining runs,
// calibration lookups, validation of calibration uploads, and the cache the
// detectors read (with a scripted source).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/history/baselines.h"
#include "engine/history/history.h"
#include "engine/history/history_service.h"
#include "engine/history/latency_histogram.h"
#include "xpu/record.h"

namespace xpu::engine::history {
namespace {

TEST(LatencyHistogramTest, BucketsAreFourPerDecade) {
  EXPECT_EQ(LatencyHistogram::BucketOf(-5), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(0.5), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(1.0), 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(1.7), 1);  // [1, 10^0.25 = 1.778)
  EXPECT_EQ(LatencyHistogram::BucketOf(1.8), 2);
  EXPECT_EQ(LatencyHistogram::BucketOf(10.0), 5);  // [10, 17.8)
  EXPECT_EQ(LatencyHistogram::BucketOf(1e9), LatencyHistogram::kBuckets - 1);
  EXPECT_DOUBLE_EQ(LatencyHistogram::LowerEdgeUs(5), 10.0);
  EXPECT_DOUBLE_EQ(LatencyHistogram::LowerEdgeUs(0), 0.0);
}

TEST(LatencyHistogramTest, QuantileInterpolatesInsideTheBucket) {
  LatencyHistogram h;
  EXPECT_EQ(h.MedianUs(), 0);
  h.Add(100, 10);  // bucket [100, 177.8)
  // Half of the bucket's mass: the geometric middle of its edges.
  EXPECT_NEAR(h.MedianUs(), 100 * std::pow(10.0, 0.125), 1e-9);
  h.Add(1000, 30);  // now the median is in [1000, 1778)
  EXPECT_GE(h.MedianUs(), 1000);
  EXPECT_LT(h.MedianUs(), 1778.3);
  EXPECT_EQ(h.total(), 40u);
  LatencyHistogram g;
  g.Set(3, 5);
  g.Set(3, 7);
  g.Set(99, 1);  // ignored
  EXPECT_EQ(g.total(), 7u);
  g.Merge(h);
  EXPECT_EQ(g.total(), 47u);
}

TEST(LatencyHistogramTest, KsAgainstSamplesOnTheGrid) {
  LatencyHistogram h;
  for (int i = 0; i < 100; ++i) h.Add(500 + i);  // all in [316, 562) or [562, 1000)
  std::vector<double> same;
  for (int i = 0; i < 50; ++i) same.push_back(500 + 2 * i);
  EXPECT_LT(KsDistance(same, h), 0.1);
  std::vector<double> collapsed(50, 3.0);  // issue latencies near zero
  EXPECT_DOUBLE_EQ(KsDistance(collapsed, h), 1.0);
  EXPECT_EQ(KsDistance({}, h), 0);
}

RunBaseline MakeRun(const std::string& job, double step_s, double vi, double tflops) {
  RunBaseline r;
  r.job_name = "gpt";
  r.gpu_model = "NVIDIA H200";
  r.job = job;
  r.step_median_s = step_s;
  r.step_best_s = step_s * 0.9;
  r.void_inter = vi;
  if (tflops > 0) r.gemm["k"] = GemmFigure{"bf16", tflops, 10};
  r.issue_latency["compute"].Add(100, 5);
  return r;
}

TEST(CombineRunsTest, MedianOfRunsAndBestOfBests) {
  HistoryBaseline h = CombineRuns(
      {MakeRun("a", 0.050, 0.02, 600), MakeRun("b", 0.060, -1, 0), MakeRun("c", 0.100, 0.04, 500)});
  EXPECT_EQ(h.runs, 3);
  EXPECT_DOUBLE_EQ(h.step_median_s.value, 0.060);  // one slow run does not move it
  EXPECT_EQ(h.step_median_s.runs, 3);
  EXPECT_DOUBLE_EQ(h.step_best_s.value, 0.045);
  EXPECT_DOUBLE_EQ(h.void_inter.value, 0.03);  // the run without V_inter does not count
  EXPECT_EQ(h.void_inter.runs, 2);
  EXPECT_FALSE(h.void_minority.known());
  ASSERT_EQ(h.gemm_tflops.count("k"), 1u);
  EXPECT_DOUBLE_EQ(h.gemm_tflops["k"].value, 550);
  EXPECT_EQ(h.gemm_tflops["k"].runs, 2);
  EXPECT_EQ(h.issue_latency["compute"].total(), 15u);
  EXPECT_EQ(h.issue_latency_runs["compute"], 3);
  EXPECT_EQ(h.Describe(3), "3 previous runs of job 'gpt' on NVIDIA H200");
  EXPECT_TRUE(CombineRuns({}).empty());
}

TEST(CalibrationTest, BestHostAndLogInterpolatedBusBw) {
  CalibrationRows rows;
  rows.gemm.push_back(GemmCalibrationRow{"M", "h0", "bf16", 700, 650, 8192, 8192, 8192, 8, 1});
  rows.gemm.push_back(GemmCalibrationRow{"M", "h1", "bf16", 720, 700, 8192, 8192, 8192, 8, 1});
  rows.gemm.push_back(GemmCalibrationRow{"other", "h2", "fp16", 900, 900, 8192, 8192, 8192, 8, 1});
  auto point = [](uint64_t bytes, double busbw) {
    return CollectiveCalibrationRow{
        "M", "h0", CollectiveShape{"allreduce", bytes, 8, 1}, 1, busbw, busbw, 1};
  };
  rows.collectives = {point(1 << 20, 10e9), point(4 << 20, 40e9), point(16 << 20, 160e9)};
  Calibration c = CombineCalibration("M", rows);
  ASSERT_NE(c.Gemm("bf16"), nullptr);
  EXPECT_DOUBLE_EQ(c.Gemm("bf16")->tflops, 720);
  EXPECT_EQ(c.Gemm("bf16")->host, "h1");
  EXPECT_EQ(c.Gemm("fp16"), nullptr) << "another model's row";
  std::string how;
  auto exact = c.BusBw(CollectiveShape{"allreduce", 4 << 20, 8, 1}, &how);
  ASSERT_TRUE(exact.has_value());
  EXPECT_DOUBLE_EQ(*exact, 40e9);
  EXPECT_NE(how.find("h0"), std::string::npos) << how;
  // 2 MiB is halfway between 1 and 4 MiB in log size; busbw is linear in
  // size here, so log-log interpolation gives 20 GB/s exactly.
  auto mid = c.BusBw(CollectiveShape{"allreduce", 2 << 20, 8, 1});
  ASSERT_TRUE(mid.has_value());
  EXPECT_NEAR(*mid, 20e9, 1e3);
  EXPECT_FALSE(c.BusBw(CollectiveShape{"allreduce", 64 << 20, 8, 1}).has_value())
      << "beyond the range";
  EXPECT_FALSE(c.BusBw(CollectiveShape{"allreduce", 4 << 20, 16, 2}).has_value()) << "other shape";
  EXPECT_FALSE(c.BusBw(CollectiveShape{"allgather", 4 << 20, 8, 1}).has_value());
}

TEST(StableGemmKeyTest, IgnoresApiNameKeepsDimsDtypeAndTransposes) {
  analysis::OpSig s;
  s.kind = XPU_OP_GEMM;
  s.dtype = XPU_DT_BF16;
  s.m = 4096;
  s.n = 8192;
  s.k = 1024;
  s.batch = 0;
  s.gemm_flags = XPU_GEMM_TRANSB;
  s.name = "cublasGemmEx";
  EXPECT_EQ(StableGemmKey(s), "gemm bf16 m=4096 n=8192 k=1024 b=1 NT");
  analysis::OpSig t = s;
  t.name = "cublasLtMatmul";
  EXPECT_EQ(StableGemmKey(t), StableGemmKey(s));
  t.gemm_flags = 0;
  EXPECT_NE(StableGemmKey(t), StableGemmKey(s));
  EXPECT_EQ(GemmDtypeClass(XPU_DT_F8_E5M2), "fp8");
  EXPECT_EQ(GemmDtypeClass(XPU_DT_I8), "");
}

xpu::v1::CalibrationReport GoodReport() {
  xpu::v1::CalibrationReport r;
  r.set_gpu_model("NVIDIA H200");
  r.set_host("node0");
  r.set_measured_ns(123);
  auto* g = r.add_gemm();
  g->set_dtype("bf16");
  g->set_tflops(700);
  g->set_tflops_min(690);
  g->set_m(8192);
  auto* c = r.add_collectives();
  c->set_op("allreduce");
  c->set_bytes(1 << 20);
  c->set_nranks(8);
  c->set_nodes(1);
  c->set_time_us(50);
  c->set_algbw_bytes_per_second(21e9);
  c->set_busbw_bytes_per_second(36.7e9);
  return r;
}

TEST(CalibrationUploadTest, ValidatesEveryEntry) {
  absl::StatusOr<CalibrationRows> ok = CalibrationRowsOf(GoodReport());
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->gemm.size(), 1u);
  EXPECT_EQ(ok->gemm[0].gpu_model, "NVIDIA H200");
  EXPECT_EQ(ok->gemm[0].measured_ns, 123u);
  ASSERT_EQ(ok->collectives.size(), 1u);
  EXPECT_EQ(ok->collectives[0].shape.nranks, 8);

  auto rejects = [](const std::function<void(xpu::v1::CalibrationReport*)>& spoil,
                    const std::string& why) {
    xpu::v1::CalibrationReport r = GoodReport();
    spoil(&r);
    absl::StatusOr<CalibrationRows> got = CalibrationRowsOf(r);
    EXPECT_FALSE(got.ok()) << why;
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << why;
    }
  };
  rejects([](auto* r) { r->clear_gpu_model(); }, "no model");
  rejects([](auto* r) { r->set_gpu_model("bad\nname"); }, "control character");
  rejects([](auto* r) { r->mutable_gemm(0)->set_dtype("int4"); }, "dtype");
  rejects([](auto* r) { r->mutable_gemm(0)->set_tflops(NAN); }, "NaN");
  rejects([](auto* r) { r->mutable_gemm(0)->set_tflops_min(900); }, "min above best");
  rejects([](auto* r) { *r->add_gemm() = r->gemm(0); }, "dtype twice");
  rejects([](auto* r) { r->mutable_collectives(0)->set_op("gossip"); }, "op");
  rejects([](auto* r) { r->mutable_collectives(0)->set_nranks(1); }, "one rank");
  rejects([](auto* r) { r->mutable_collectives(0)->set_nodes(9); }, "more nodes than ranks");
  rejects([](auto* r) { r->mutable_collectives(0)->set_busbw_bytes_per_second(-1); },
          "negative busbw");
  rejects(
      [](auto* r) {
        r->clear_gemm();
        r->clear_collectives();
      },
      "empty");
}

// A scripted source: counts loads, answers from fixed runs.
class ScriptedSource : public HistorySource {
 public:
  absl::StatusOr<std::vector<RunBaseline>> PreviousRuns(const std::string& job_name,
                                                        const std::string& gpu_model,
                                                        const std::string& exclude_job,
                                                        int limit) override {
    ++run_loads;
    last_model = gpu_model;
    last_limit = limit;
    std::vector<RunBaseline> out;
    for (const RunBaseline& r : runs) {
      if (r.job_name == job_name && r.gpu_model == gpu_model && r.job != exclude_job)
        out.push_back(r);
    }
    return out;
  }
  absl::StatusOr<CalibrationRows> CalibrationOf(const std::string& gpu_model) override {
    ++calibration_loads;
    return calibration;
  }
  std::vector<RunBaseline> runs;
  CalibrationRows calibration;
  int run_loads = 0, calibration_loads = 0, last_limit = 0;
  std::string last_model;
};

TEST(HistoryCacheTest, LoadsOncePerKeyAndAgainWhenTheModelAppears) {
  auto source = std::make_shared<ScriptedSource>();
  source->runs = {MakeRun("old-1", 0.05, 0.02, 600), MakeRun("me", 0.5, 0.5, 1)};
  source->calibration.gemm.push_back(
      GemmCalibrationRow{"NVIDIA H200", "h", "bf16", 700, 700, 1, 1, 1, 1, 1});
  auto config = std::make_shared<DetectorConfig>();
  HistoryCache cache(source, config);
  JobState job("me", "gpt", 16, 1);
  // No process reports a GPU model yet: runs of the unknown model, no calibration.
  const JobHistory& h0 = cache.Get(job);
  EXPECT_EQ(h0.gpu_model, "");
  EXPECT_TRUE(h0.baseline.empty());
  EXPECT_EQ(source->calibration_loads, 0);
  EXPECT_EQ(source->last_limit, 5) << "history.runs";
  cache.Get(job);
  EXPECT_EQ(source->run_loads, 1) << "cached";

  xpu::v1::ProcessIdentity id;
  id.set_job("me");
  id.set_rank(0);
  id.set_host("h");
  id.set_pid(1);
  id.set_gpu_model("NVIDIA H200");
  job.GetOrCreateProcess(id, "d", 2);
  const JobHistory& h1 = cache.Get(job);
  EXPECT_EQ(source->run_loads, 2) << "the key changed";
  EXPECT_EQ(h1.gpu_model, "NVIDIA H200");
  EXPECT_EQ(h1.baseline.runs, 1) << "the job's own run is excluded";
  EXPECT_DOUBLE_EQ(h1.baseline.step_median_s.value, 0.05);
  ASSERT_NE(h1.calibration.Gemm("bf16"), nullptr);

  HistoryCache no_store(nullptr, config);
  EXPECT_TRUE(no_store.Get(job).baseline.empty());
  EXPECT_TRUE(no_store.Get(job).calibration.empty());
}

}  // namespace
}  // namespace xpu::engine::history
