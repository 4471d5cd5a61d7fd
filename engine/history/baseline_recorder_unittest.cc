// The baseline recorder: a window's figures measured apart (Measure, as the
// engine does beside the detectors of a large job) and kept after (Take)
// make the run OnWindow makes; an unhealthy window is not kept.
#include "engine/history/baseline_recorder.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "engine/testing/detector_testing.h"

namespace xpu::engine::history {
namespace {

using namespace engine::testing;  // NOLINT: the job builder

constexpr uint32_t kStep = 1, kGemm = 2, kAllReduce = 3;

// Four ranks, five 10 ms steps each: a 4096^3 GEMM of 1 ms (issued 100 us
// ahead) and an all-reduce of 2 ms (issued 50 us ahead) per step.
void Play(TestJob* job, uint64_t from) {
  for (int r = 0; r < 4; ++r) {
    job->Define(r, HostSig(kStep, XPU_OP_STEP));
    job->Define(r, GemmSig(kGemm, 4096, 4096, 4096));
    job->Define(r, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 8 << 20, 5, r, 4));
    for (int s = 0; s <= 5; ++s) {
      const uint64_t t = from + s * 10 * kMs;
      job->Add(r, Host(kStep, t, kUs, s));
      if (s == 5) break;
      job->Add(r, Timed(kGemm, t + 1500 * kUs, kMs, s, 100 * kUs));
      job->Add(r, Timed(kAllReduce, t + 3 * kMs, 2 * kMs, s, 50 * kUs, 4));
    }
  }
  job->CloseWindow();
}

TEST(BaselineRecorderTest, MeasuredApartAndTakenAfterIsWhatOnWindowKeeps) {
  auto config = Config({{"history.baseline_windows", 1}});
  std::vector<RunBaseline> one, two;
  auto views_one = std::make_shared<WindowViews>(), views_two = std::make_shared<WindowViews>();
  BaselineRecorder whole(views_one, config, [&](const RunBaseline& b, int) { one.push_back(b); });
  BaselineRecorder parts(views_two, config, [&](const RunBaseline& b, int) { two.push_back(b); });
  TestJob job;
  const std::vector<Diagnosis> healthy;
  Diagnosis fault;
  fault.kind = "slow_gpu";
  for (int w = 0; w < 3; ++w) {
    Play(&job, kSec + static_cast<uint64_t>(w) * kSec);
    // The second window has a fault: neither keeps it.
    const std::vector<Diagnosis>& found = w == 1 ? std::vector<Diagnosis>{fault} : healthy;
    // The engine builds every window's view, healthy or not.
    views_one->Get(job.state());
    views_two->Get(job.state());
    whole.OnWindow(job.state(), found, 100 + w);
    BaselineRecorder::WindowFigures f = parts.Measure(job.state());
    ASSERT_TRUE(f.measured);
    parts.Take(job.state(), std::move(f), found, 100 + w);
    views_one->Release(job.state().job());
    views_two->Release(job.state().job());
  }
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  for (size_t i = 0; i < one.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(two[i].windows, one[i].windows);
    EXPECT_EQ(two[i].steps, one[i].steps);
    EXPECT_DOUBLE_EQ(two[i].step_median_s, one[i].step_median_s);
    EXPECT_DOUBLE_EQ(two[i].void_inter, one[i].void_inter);
    ASSERT_EQ(two[i].gemm.size(), one[i].gemm.size());
    ASSERT_EQ(one[i].gemm.size(), 1u);
    EXPECT_DOUBLE_EQ(two[i].gemm.begin()->second.tflops, one[i].gemm.begin()->second.tflops);
    EXPECT_EQ(two[i].gemm.begin()->second.count, one[i].gemm.begin()->second.count);
    EXPECT_EQ(two[i].busbw.size(), one[i].busbw.size());
    ASSERT_EQ(two[i].issue_latency.size(), one[i].issue_latency.size());
    for (const auto& [family, h] : one[i].issue_latency) {
      EXPECT_EQ(two[i].issue_latency.at(family).total(), h.total()) << family;
    }
  }
  EXPECT_EQ(one.back().windows, 2u) << "the faulty window is not kept";
  EXPECT_NEAR(one.back().step_median_s, 0.010, 1e-9);
}

}  // namespace
}  // namespace xpu::engine::history
