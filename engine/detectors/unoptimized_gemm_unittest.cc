#include "engine/detectors/unoptimized_gemm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

// Shapes: an aligned 8192^3 GEMM (1.1 TFLOP per call), the misaligned
// 4096 x 4096 x 8484 of a vocabulary padded badly (284.7 GFLOP), an
// aligned 4096^3 (137.4 GFLOP) and a small 1024^3 (2.1 GFLOP).
constexpr uint32_t kBig = 1, kMisaligned = 2, kMedium = 3, kSmall = 4;

double Flops(uint32_t sig) {
  switch (sig) {
    case kBig:
      return 2.0 * 8192 * 8192 * 8192;
    case kMisaligned:
      return 2.0 * 4096 * 4096 * 8484;
    case kMedium:
      return 2.0 * 4096 * 4096 * 4096;
    default:
      return 2.0 * 1024 * 1024 * 1024;
  }
}

class UnoptimizedGemmTest : public ::testing::Test {
 protected:
  void UseDetector(std::shared_ptr<const DetectorConfig> config,
                   std::shared_ptr<history::HistoryCache> history = nullptr) {
    detector_ = std::make_unique<UnoptimizedGemmDetector>(std::make_shared<WindowViews>(),
                                                          std::move(config), std::move(history));
  }
  // Five calls of `sig` at `tflops` on each rank in `ranks`.
  void Gemms(const std::vector<int>& ranks, uint32_t sig, double tflops) {
    const uint64_t dur = static_cast<uint64_t>(std::llround(Flops(sig) / (tflops * 1e3)));
    for (int r : ranks) {
      job_.Rank(r, "", "Test GPU");
      job_.Define(r, GemmSig(kBig, 8192, 8192, 8192));
      job_.Define(r, GemmSig(kMisaligned, 4096, 4096, 8484));
      job_.Define(r, GemmSig(kMedium, 4096, 4096, 4096));
      job_.Define(r, GemmSig(kSmall, 1024, 1024, 1024));
      for (int i = 0; i < 5; ++i) job_.Add(r, Timed(sig, t_ + i * 20 * kMs, dur, i));
    }
    t_ += 200 * kMs;
  }
  std::vector<Diagnosis> Window() {
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }

  const std::vector<int> all_ = {0, 1, 2, 3};
  TestJob job_;
  uint64_t t_ = kSec;
  std::unique_ptr<UnoptimizedGemmDetector> detector_ =
      std::make_unique<UnoptimizedGemmDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(UnoptimizedGemmTest, WellPerformingShapesAreSilent) {
  for (int w = 0; w < 3; ++w) {
    Gemms(all_, kBig, 500);
    Gemms(all_, kMedium, 450);
    EXPECT_TRUE(Window().empty());
  }
}

TEST_F(UnoptimizedGemmTest, MisalignedShapeFarBelowTheJobsBestShape) {
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kBig, 500);
    Gemms(all_, kMisaligned, 175);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());  // two consecutive windows
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "unoptimized_gemm");
  EXPECT_EQ(d.team, Team::kInfrastructure);
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_THAT(d.ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_THAT(d.subject, HasSubstr("4096x4096x8484x1"));
  EXPECT_THAT(d.evidence, HasSubstr("' (284.7 GFLOP per call) reaches at most 175.0 TFLOPS (median "
                                    "175.0) on all 4 ranks vs reference 500.0 TFLOPS (best shape "
                                    "of this job): 0.35x < 0.60x; likely cause: k=8484 is not a "
                                    "multiple of 64 elements"));
}

TEST_F(UnoptimizedGemmTest, AlignedButSlowPointsAtTheKernelChoice) {
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kBig, 500);
    Gemms(all_, kMedium, 150);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].subject, HasSubstr("4096x4096x4096x1"));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("; dimensions are aligned, check the kernel choice / layout"));
}

TEST_F(UnoptimizedGemmTest, ShapeOnFewRanksOrTooSmallIsNotJudged) {
  for (int w = 0; w < 3; ++w) {
    Gemms(all_, kBig, 500);
    Gemms({2}, kMisaligned, 100);  // one rank of four: a rank-specific op
    Gemms(all_, kSmall, 20);       // 4 us at the reference: latency-bound
    EXPECT_TRUE(Window().empty());
  }
}

TEST_F(UnoptimizedGemmTest, ConfiguredPeakIsTheReference) {
  UseDetector(Config({{"unoptimized_gemm.peak_tflops", 700}}));
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kBig, 500);  // 0.71x of the peak: fine
    Gemms(all_, kMisaligned, 175);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].subject, HasSubstr("4096x4096x8484x1"));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("vs reference 700.0 TFLOPS (configured peak): 0.25x < 0.60x"));
}

TEST_F(UnoptimizedGemmTest, CalibratedPeakOfTheGpuModel) {
  auto source = std::make_shared<FixedHistory>();
  history::GemmCalibrationRow row;
  row.gpu_model = "Test GPU";
  row.host = "calib-host";
  row.dtype = "bf16";
  row.tflops = 800;
  source->calibration.gemm.push_back(row);
  UseDetector(Config(), std::make_shared<history::HistoryCache>(source, Config()));
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kBig, 600);
    Gemms(all_, kMedium, 400);  // 0.5x of the calibrated peak
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].subject, HasSubstr("4096x4096x4096x1"));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("vs reference 800.0 TFLOPS (calibrated bf16 peak of Test GPU, xpu "
                        "calibrate on calib-host): 0.50x < 0.60x"));
}

TEST_F(UnoptimizedGemmTest, SameGemmSlowerThanInPreviousRuns) {
  auto source = std::make_shared<FixedHistory>();
  history::RunBaseline run;
  analysis::OpSig sig;
  sig.kind = XPU_OP_GEMM;
  sig.dtype = XPU_DT_BF16;
  sig.m = sig.n = sig.k = 4096;
  run.gemm[history::StableGemmKey(sig)] = history::GemmFigure{"bf16", 500, 100};
  source->AddRuns(2, run, "gpt", "Test GPU");
  UseDetector(Config(), std::make_shared<history::HistoryCache>(source, Config()));
  // The job's only shape: its own best, but half of what it reached before.
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kMedium, 250);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].evidence,
              HasSubstr(" on all 4 ranks vs 500.0 TFLOPS of the same GEMM in 2 previous runs of "
                        "job 'gpt' on Test GPU: 0.50x < 0.60x"));
  EXPECT_THAT(out[0].evidence, Not(HasSubstr("best shape of this job")));
}

// A shape that ran at the job's best rate and then slowed (the GPU did, in
// a one-rank job): the kernel choice is good; no unoptimized_gemm.
TEST_F(UnoptimizedGemmTest, ShapeThatReachedTheReferenceEarlierIsNotAKernelChoice) {
  for (int w = 0; w < 2; ++w) {
    Gemms(all_, kBig, 500);
    Gemms(all_, kMedium, 450);
    EXPECT_TRUE(Window().empty());
  }
  for (int w = 0; w < 3; ++w) {
    Gemms(all_, kBig, 200);
    Gemms(all_, kMedium, 180);
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

}  // namespace
}  // namespace xpu::engine
