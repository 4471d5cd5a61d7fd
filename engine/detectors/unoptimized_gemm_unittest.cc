#include "engine/detectors/unoptimized_gemm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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


// A one-rank job: the misaligned shape against the job's best shape.
TEST_F(UnoptimizedGemmTest, MisalignedShapeInAOneRankJob) {
  for (int w = 0; w < 2; ++w) {
    Gemms({0}, kBig, 868);
    Gemms({0}, kMisaligned, 250);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
}

// A one-GPU job's DDP all-reduces run on a one-rank communicator and have no
// timed record: their records span launch to the poll that saw them done,
// here the whole window's GEMMs. They move nothing between GPUs and must not
// hide the shape.
TEST_F(UnoptimizedGemmTest, OneRankJobsUntimedAllReducesDoNotHideItsGemms) {
  constexpr uint32_t kAllReduce = 9;
  for (int w = 0; w < 2; ++w) {
    job_.Rank(0, "", "Test GPU");
    job_.Define(0, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 77, 0, 1));
    job_.Add(0, MakeRecord(kAllReduce, t_ - kMs, static_cast<uint32_t>(450 * kMs),
                           static_cast<uint32_t>(w), XPU_REC_NOT_TIMED));
    Gemms({0}, kBig, 868);
    Gemms({0}, kMisaligned, 250);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].subject, HasSubstr("4096x4096x8484x1"));
}

// The figures of a one-rank GPT with an FFN width of 8484 on an H200, as the
// engine's window_gemm table held them: every signature of the job's eight
// windows of 3 s (count and total time per window; the last one partial), cuBLAS and
// cuBLASLt calls of the same shape separate, the vocabulary GEMMs at 2 calls
// per window after the second. The four 8484 shapes (six signatures) run at
// 217 to 269 TFLOPS, the others at 707 to 868.
struct RealRow {
  const char* name;
  uint32_t m, n, k;
  int count;
  uint64_t total_ns;
};
// clang-format off
const std::vector<std::vector<RealRow>> kFfn8484Windows = {
    // window 1: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 37, 3301376}, {"cublasGemmEx", 2048, 32000, 8192, 16, 24024800}, {"cublasGemmEx", 2048, 6144, 8192, 37, 9665152}, {"cublasGemmEx", 2048, 8192, 2048, 37, 3575584}, {"cublasGemmEx", 2048, 8192, 32000, 16, 20440640}, {"cublasGemmEx", 2048, 8192, 6144, 37, 9604608}, {"cublasGemmEx", 2048, 8192, 8484, 37, 39177280}, {"cublasGemmEx", 2048, 8484, 8192, 37, 43323680}, {"cublasGemmEx", 32000, 8192, 2048, 16, 21990560}, {"cublasGemmEx", 8484, 2048, 8192, 38, 49514848}, {"cublasGemmEx", 8484, 8192, 2048, 38, 43063008}, {"cublasLtMatmul", 2048, 8192, 2048, 38, 3584288}, {"cublasLtMatmul", 2048, 8192, 8484, 38, 47883808}, {"cublasLtMatmul", 6144, 8192, 2048, 38, 10823136}, {"cublasLtMatmul", 8484, 8192, 2048, 38, 41363840}},
    // window 2: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 17, 1508800}, {"cublasGemmEx", 2048, 32000, 8192, 17, 23127040}, {"cublasGemmEx", 2048, 6144, 8192, 17, 4489440}, {"cublasGemmEx", 2048, 8192, 2048, 17, 1651936}, {"cublasGemmEx", 2048, 8192, 32000, 17, 21446080}, {"cublasGemmEx", 2048, 8192, 6144, 17, 4450464}, {"cublasGemmEx", 2048, 8192, 8484, 17, 18111328}, {"cublasGemmEx", 2048, 8484, 8192, 17, 20074624}, {"cublasGemmEx", 32000, 8192, 2048, 17, 22903648}, {"cublasGemmEx", 8484, 2048, 8192, 16, 21010560}, {"cublasGemmEx", 8484, 8192, 2048, 16, 18266752}, {"cublasLtMatmul", 2048, 8192, 2048, 16, 1444192}, {"cublasLtMatmul", 2048, 8192, 8484, 16, 20264032}, {"cublasLtMatmul", 6144, 8192, 2048, 16, 4244736}, {"cublasLtMatmul", 8484, 8192, 2048, 16, 17475232}},
    // window 3: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 16, 1421920}, {"cublasGemmEx", 2048, 32000, 8192, 2, 2711808}, {"cublasGemmEx", 2048, 6144, 8192, 16, 4233728}, {"cublasGemmEx", 2048, 8192, 2048, 16, 1555904}, {"cublasGemmEx", 2048, 8192, 32000, 2, 2494848}, {"cublasGemmEx", 2048, 8192, 6144, 16, 4196256}, {"cublasGemmEx", 2048, 8192, 8484, 16, 17016544}, {"cublasGemmEx", 2048, 8484, 8192, 16, 18835744}, {"cublasGemmEx", 32000, 8192, 2048, 2, 2667360}, {"cublasGemmEx", 8484, 2048, 8192, 16, 20959136}, {"cublasGemmEx", 8484, 8192, 2048, 16, 18215616}, {"cublasLtMatmul", 2048, 8192, 2048, 17, 1537280}, {"cublasLtMatmul", 2048, 8192, 8484, 17, 21533920}, {"cublasLtMatmul", 6144, 8192, 2048, 17, 4490976}, {"cublasLtMatmul", 8484, 8192, 2048, 17, 18573504}},
    // window 4: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 17, 1511008}, {"cublasGemmEx", 2048, 32000, 8192, 2, 2720320}, {"cublasGemmEx", 2048, 6144, 8192, 17, 4501056}, {"cublasGemmEx", 2048, 8192, 2048, 17, 1649632}, {"cublasGemmEx", 2048, 8192, 32000, 2, 2487648}, {"cublasGemmEx", 2048, 8192, 6144, 17, 4460128}, {"cublasGemmEx", 2048, 8192, 8484, 17, 18027552}, {"cublasGemmEx", 2048, 8484, 8192, 17, 19927552}, {"cublasGemmEx", 32000, 8192, 2048, 2, 2668544}, {"cublasGemmEx", 8484, 2048, 8192, 17, 22200640}, {"cublasGemmEx", 8484, 8192, 2048, 17, 19292384}, {"cublasLtMatmul", 2048, 8192, 2048, 16, 1442688}, {"cublasLtMatmul", 2048, 8192, 8484, 16, 20185600}, {"cublasLtMatmul", 6144, 8192, 2048, 16, 4222368}, {"cublasLtMatmul", 8484, 8192, 2048, 16, 17415456}},
    // window 5: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 16, 1423328}, {"cublasGemmEx", 2048, 32000, 8192, 2, 2724736}, {"cublasGemmEx", 2048, 6144, 8192, 16, 4236768}, {"cublasGemmEx", 2048, 8192, 2048, 16, 1551456}, {"cublasGemmEx", 2048, 8192, 32000, 2, 2481824}, {"cublasGemmEx", 2048, 8192, 6144, 16, 4196768}, {"cublasGemmEx", 2048, 8192, 8484, 16, 16934112}, {"cublasGemmEx", 2048, 8484, 8192, 16, 18720224}, {"cublasGemmEx", 32000, 8192, 2048, 2, 2674240}, {"cublasGemmEx", 8484, 2048, 8192, 16, 20843968}, {"cublasGemmEx", 8484, 8192, 2048, 16, 18111104}, {"cublasLtMatmul", 2048, 8192, 2048, 17, 1533888}, {"cublasLtMatmul", 2048, 8192, 8484, 17, 21429568}, {"cublasLtMatmul", 6144, 8192, 2048, 17, 4484448}, {"cublasLtMatmul", 8484, 8192, 2048, 17, 18498336}},
    // window 6: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 17, 1512640}, {"cublasGemmEx", 2048, 32000, 8192, 2, 2727200}, {"cublasGemmEx", 2048, 6144, 8192, 17, 4500864}, {"cublasGemmEx", 2048, 8192, 2048, 17, 1645888}, {"cublasGemmEx", 2048, 8192, 32000, 2, 2479072}, {"cublasGemmEx", 2048, 8192, 6144, 17, 4452064}, {"cublasGemmEx", 2048, 8192, 8484, 17, 18027488}, {"cublasGemmEx", 2048, 8484, 8192, 17, 19917632}, {"cublasGemmEx", 32000, 8192, 2048, 2, 2669824}, {"cublasGemmEx", 8484, 2048, 8192, 17, 22186528}, {"cublasGemmEx", 8484, 8192, 2048, 17, 19286304}, {"cublasLtMatmul", 2048, 8192, 2048, 16, 1442720}, {"cublasLtMatmul", 2048, 8192, 8484, 16, 20193216}, {"cublasLtMatmul", 6144, 8192, 2048, 16, 4221696}, {"cublasLtMatmul", 8484, 8192, 2048, 16, 17425568}},
    // window 7: 15 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 16, 1422944}, {"cublasGemmEx", 2048, 32000, 8192, 2, 2728384}, {"cublasGemmEx", 2048, 6144, 8192, 16, 4226144}, {"cublasGemmEx", 2048, 8192, 2048, 16, 1552512}, {"cublasGemmEx", 2048, 8192, 32000, 2, 2473152}, {"cublasGemmEx", 2048, 8192, 6144, 16, 4200672}, {"cublasGemmEx", 2048, 8192, 8484, 16, 17005472}, {"cublasGemmEx", 2048, 8484, 8192, 16, 18754112}, {"cublasGemmEx", 32000, 8192, 2048, 2, 2663968}, {"cublasGemmEx", 8484, 2048, 8192, 16, 20901856}, {"cublasGemmEx", 8484, 8192, 2048, 16, 18156544}, {"cublasLtMatmul", 2048, 8192, 2048, 16, 1443520}, {"cublasLtMatmul", 2048, 8192, 8484, 16, 20205760}, {"cublasLtMatmul", 6144, 8192, 2048, 16, 4220576}, {"cublasLtMatmul", 8484, 8192, 2048, 16, 17430080}},
    // window 8: 12 signatures
    {{"cublasGemmEx", 2048, 2048, 8192, 1, 88960}, {"cublasGemmEx", 2048, 6144, 8192, 1, 264576}, {"cublasGemmEx", 2048, 8192, 2048, 1, 97088}, {"cublasGemmEx", 2048, 8192, 6144, 1, 262624}, {"cublasGemmEx", 2048, 8192, 8484, 1, 1063616}, {"cublasGemmEx", 2048, 8484, 8192, 1, 1173312}, {"cublasGemmEx", 8484, 2048, 8192, 1, 1306400}, {"cublasGemmEx", 8484, 8192, 2048, 1, 1135200}, {"cublasLtMatmul", 2048, 8192, 2048, 1, 89856}, {"cublasLtMatmul", 2048, 8192, 8484, 1, 1251328}, {"cublasLtMatmul", 6144, 8192, 2048, 1, 262816}, {"cublasLtMatmul", 8484, 8192, 2048, 1, 1079712}},
};
// clang-format on

TEST_F(UnoptimizedGemmTest, RealFfn8484WindowsOfAnH200) {
  std::map<std::string, uint32_t> ids;
  job_.Rank(0, "", "NVIDIA H200");
  size_t w = 0;
  std::set<std::string> subjects;
  for (const auto& window : kFfn8484Windows) {
    for (const RealRow& r : window) {
      const std::string key = absl::StrCat(r.name, " ", r.m, "x", r.n, "x", r.k);
      auto [it, fresh] = ids.emplace(key, static_cast<uint32_t>(ids.size() + 1));
      if (fresh) {
        xpu::v1::Signature s = GemmSig(it->second, r.m, r.n, r.k);
        s.set_name(r.name);
        job_.Define(0, s);
      }
      const uint64_t dur = r.total_ns / static_cast<uint64_t>(r.count);
      for (int i = 0; i < r.count; ++i) {
        job_.Add(0, Timed(it->second, t_, dur, static_cast<uint32_t>(i)));
        t_ += dur + 10 * kUs;
      }
    }
    job_.CloseWindow(3 * kSec);
    for (const Diagnosis& d : Diagnose(*detector_, job_)) {
      EXPECT_GE(w, 1u) << d.subject;  // never in the first window
      EXPECT_THAT(d.subject, HasSubstr("8484"));
      subjects.insert(d.subject);
    }
    ++w;
  }
  EXPECT_EQ(subjects.size(), 6u) << absl::StrJoin(subjects, "; ");
}

}  // namespace
}  // namespace xpu::engine
