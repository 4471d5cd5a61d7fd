#include "engine/detectors/slow_gpu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kGemm = 1;       // 4096^3: 137.4 GFLOP
constexpr uint32_t kSmallGemm = 2;  // 2048^3
constexpr uint32_t kWideGemm = 3;   // 8192 x 1024 x 4096
constexpr uint32_t kAllReduce = 4;

class SlowGpuTest : public ::testing::Test {
 protected:
  // `n` back-to-back timed GEMMs of `sig` of `dur_ns` each on `rank`.
  void Gemms(int rank, uint32_t sig, int n, uint64_t dur_ns, uint64_t start_ns = kSec) {
    job_.Define(rank, GemmSig(kGemm, 4096, 4096, 4096));
    job_.Define(rank, GemmSig(kSmallGemm, 2048, 2048, 2048));
    job_.Define(rank, GemmSig(kWideGemm, 8192, 1024, 4096));
    for (int i = 0; i < n; ++i) job_.Add(rank, Timed(sig, start_ns + i * 10 * kMs, dur_ns, i));
  }
  std::vector<Diagnosis> Window() {
    job_.CloseWindow();
    return Diagnose(detector_, job_);
  }

  TestJob job_;
  SlowGpuDetector detector_{std::make_shared<WindowViews>(), Config()};
};

TEST_F(SlowGpuTest, RankFarBelowItsPeersIsReported) {
  for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 5, r == 2 ? 2 * kMs : kMs);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "slow_gpu");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_THAT(d.ranks, ElementsAre(2));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_EQ(d.subject, "rank:2");
  // Half the peers' throughput: below 0.6x is critical.
  EXPECT_EQ(d.severity, Severity::kCritical);
  EXPECT_THAT(d.evidence, HasSubstr("rank 2 on node0: GEMM 68.7 TFLOPS vs peer median 137.4 "
                                    "TFLOPS on 'cublasGemmEx 4096x4096x4096x1 dt"));
  EXPECT_THAT(d.evidence, HasSubstr("(0.50x); below peers on 1 of 1 shapes"));
  EXPECT_EQ(d.first_seen_ns, job_.state().window_start_ns());
}

TEST_F(SlowGpuTest, ModestDropIsAWarning) {
  for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 5, r == 1 ? 1400 * kUs : kMs);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_THAT(out[0].evidence, HasSubstr("(0.71x)"));
}

TEST_F(SlowGpuTest, PeersWithinMinDropAreSilent) {
  // 10 % apart: under slow_gpu.min_drop (15 %).
  for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 5, r == 3 ? 1100 * kUs : kMs);
  EXPECT_TRUE(Window().empty());
}

TEST_F(SlowGpuTest, TooFewGemmsOrRanksAreNotCompared) {
  // slow_gpu.min_count = 3 GEMMs per rank and shape.
  for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 2, r == 2 ? 3 * kMs : kMs);
  EXPECT_TRUE(Window().empty());
  // Three ranks ran the shape, one of them slow, but with min_ranks 4 the
  // shape is not compared.
  SlowGpuDetector strict(std::make_shared<WindowViews>(), Config({{"slow_gpu.min_ranks", 4}}));
  for (int r = 0; r < 3; ++r) Gemms(r, kGemm, 5, r == 2 ? 3 * kMs : kMs);
  job_.CloseWindow();
  EXPECT_TRUE(Diagnose(strict, job_).empty());
}

TEST_F(SlowGpuTest, GemmsOverlappingACollectiveAreLeftOut) {
  for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 5, r == 2 ? 3 * kMs : kMs);
  // Rank 2's slow GEMMs all run under one long all-reduce: contention, not
  // the GPU.
  job_.Define(2, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 77, 0, 1));
  job_.Add(2, Timed(kAllReduce, kSec - kMs, 100 * kMs));
  EXPECT_TRUE(Window().empty());
}

TEST_F(SlowGpuTest, RankMustBeLowOnHalfOfItsShapes) {
  // Rank 3 is slow on one of three shapes: not reported.
  for (int r = 0; r < 4; ++r) {
    Gemms(r, kGemm, 5, r == 3 ? 3 * kMs : kMs);
    Gemms(r, kSmallGemm, 5, 200 * kUs, 2 * kSec);
    Gemms(r, kWideGemm, 5, 500 * kUs, 3 * kSec);
  }
  EXPECT_TRUE(Window().empty());
  // Slow on two of three: reported, naming the worst shape.
  for (int r = 0; r < 4; ++r) {
    Gemms(r, kGemm, 5, r == 3 ? 3 * kMs : kMs, 10 * kSec);
    Gemms(r, kSmallGemm, 5, r == 3 ? 300 * kUs : 200 * kUs, 11 * kSec);
    Gemms(r, kWideGemm, 5, 500 * kUs, 12 * kSec);
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(3));
  EXPECT_THAT(out[0].evidence, HasSubstr("4096x4096x4096x1"));
  EXPECT_THAT(out[0].evidence, HasSubstr("(0.33x); below peers on 2 of 3 shapes"));
}

TEST_F(SlowGpuTest, TwoRanksNeedTwoConsecutiveWindows) {
  auto window = [&](bool slow) {
    for (int r = 0; r < 2; ++r) Gemms(r, kGemm, 5, slow && r == 1 ? 2 * kMs : kMs);
    return Window();
  };
  EXPECT_TRUE(window(true).empty());  // once is not enough with two ranks
  std::vector<Diagnosis> out = window(true);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence, HasSubstr("68.7 TFLOPS vs the other rank's 137.4 TFLOPS"));
  EXPECT_THAT(out[0].evidence, HasSubstr("below the other rank (two ranks: no MAD)"));
  EXPECT_TRUE(window(false).empty());
  EXPECT_TRUE(window(true).empty());  // the streak starts over
}

// Two healthy ranks whose GEMM times spread (kernels delayed by a busy
// host): a few calls 25x longer on one rank make its summed TFLOPS 0.2x the
// other's, but its median call is as fast: not a slow GPU, however often.
TEST_F(SlowGpuTest, TwoRanksWithSpreadCallsAreNotASlowGpu) {
  for (int w = 0; w < 4; ++w) {
    for (int r = 0; r < 2; ++r) {
      job_.Define(r, GemmSig(kGemm, 4096, 4096, 4096));
      for (int i = 0; i < 12; ++i) {
        const uint64_t dur = r == 1 && i % 4 == 0 ? 25 * kMs : kMs + (i % 3) * kMs / 10;
        job_.Add(r, Timed(kGemm, kSec + i * 40 * kMs, dur, i));
      }
    }
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

// Of two ranks, the one with slower GEMMs waits 3x longer in the
// all-reduces: its peer holds the job up (synchronizations there), so it is
// not a slow GPU; the same GEMMs with the waiting on the other side are.
TEST_F(SlowGpuTest, TwoRanksTheSlowerOneWaitingForItsPeerIsNotASlowGpu) {
  auto window = [&](int waits) {
    for (int r = 0; r < 2; ++r) {
      Gemms(r, kGemm, 5, r == 0 ? 2 * kMs : kMs);
      job_.Define(r, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 77, r, 2));
      job_.Add(r, Timed(kAllReduce, kSec + 100 * kMs, r == waits ? 30 * kMs : 10 * kMs, 1));
    }
    return Window();
  };
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(window(0).empty()) << "window " << w;
  window(1);
  std::vector<Diagnosis> out = window(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
}

// A one-rank job has no peers: from its third window on, its GEMMs are
// compared with its own first windows (history.baseline_windows = 2). A
// third slower, twice in a row, is a slow GPU; the rate it always had is
// not.
TEST_F(SlowGpuTest, OneRankAgainstItsOwnFirstWindows) {
  auto window = [&](uint64_t dur) {
    Gemms(0, kGemm, 5, dur);
    Gemms(0, kWideGemm, 5, dur);
    return Window();
  };
  for (int w = 0; w < 4; ++w) EXPECT_TRUE(window(kMs).empty()) << "window " << w;
  EXPECT_TRUE(window(1500 * kUs).empty());  // once is not enough
  std::vector<Diagnosis> out = window(1500 * kUs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, "slow_gpu");
  EXPECT_EQ(out[0].team, Team::kOperations);
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
  EXPECT_THAT(out[0].evidence, HasSubstr("91.6 TFLOPS vs its own first windows' 137.4 TFLOPS"));
  EXPECT_THAT(out[0].evidence, HasSubstr("below its own first windows on 2 of 2 shapes"));
  EXPECT_TRUE(window(kMs).empty());  // back to its own rate
  EXPECT_TRUE(window(2 * kMs).empty());  // half the rate: also twice in a row
  out = window(2 * kMs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kCritical);
}

// Slow from the first window: the rank's own reference is that rate.
TEST_F(SlowGpuTest, OneRankSlowFromTheStartIsItsOwnReference) {
  for (int w = 0; w < 5; ++w) {
    Gemms(0, kGemm, 5, 2 * kMs);
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

// Every rank slowed alike (the peers single none out): each against its own
// first windows.
TEST_F(SlowGpuTest, EveryRankSlowedAlikeAgainstTheirOwnFirstWindows) {
  auto window = [&](uint64_t dur) {
    for (int r = 0; r < 4; ++r) Gemms(r, kGemm, 5, dur);
    return Window();
  };
  window(kMs);
  window(kMs);
  EXPECT_TRUE(window(1400 * kUs).empty());
  std::vector<Diagnosis> out = window(1400 * kUs);
  ASSERT_EQ(out.size(), 4u);
  for (const Diagnosis& d : out) EXPECT_THAT(d.evidence, HasSubstr("its own first windows"));
}


// A GPU time-sliced with another process: some calls wait for the other
// context and take many times as long, the rest run at full rate, so the
// median call does not move. `slow_every` > 0: every that-many-th call of
// rank `rank` takes `factor` times as long. Calls are launched behind
// `queue_us` of queued work (their issue latency).
class IntermittentTest : public SlowGpuTest {
 protected:
  void Calls(int rank, int slow_every, uint64_t factor, int64_t queue_us = 5000,
             int side_stream_every = 0) {
    job_.Define(rank, GemmSig(kGemm, 4096, 4096, 4096));
    job_.Define(rank, KernelSig(kSide, "side_kernel"));
    for (int i = 0; i < 40; ++i) {
      const bool slow = slow_every > 0 && i % slow_every == 0;
      const uint64_t start = kSec + i * 20 * kMs;
      const uint64_t dur = slow ? factor * kMs : kMs + (i % 3) * kMs / 20;
      job_.Add(rank, Timed(kGemm, start, dur, i, queue_us * 1000));
      if (side_stream_every > 0 && i % side_stream_every == 0) {
        job_.Add(rank, Timed(kSide, start, dur, i, queue_us * 1000, /*stream=*/2));
      }
    }
  }
  static constexpr uint32_t kSide = 9;
};

TEST_F(IntermittentTest, OneRankWithSomeCallsManyTimesSlowerIsASharedGpu) {
  // 1 call in 4 takes 8x as long: 7 ms of every 11 lost, the median call
  // at full rate.
  Calls(0, 4, 8);
  EXPECT_TRUE(Window().empty());  // once is not enough
  Calls(0, 4, 8);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, "slow_gpu");
  EXPECT_EQ(out[0].team, Team::kOperations);
  EXPECT_THAT(out[0].ranks, ElementsAre(0));
  EXPECT_EQ(out[0].severity, Severity::kCritical);
  EXPECT_THAT(out[0].evidence, HasSubstr("10 of 40 timed GEMM calls ran more than 3x slower"));
  EXPECT_THAT(out[0].evidence, HasSubstr("slowed now and then"));
}

TEST_F(IntermittentTest, CallsThatSpreadAFewTensOfPercentAreHealthy) {
  for (int w = 0; w < 4; ++w) {
    Calls(0, 4, 2);  // 2x: under slow_gpu.intermittent_factor
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

TEST_F(IntermittentTest, RareSlowCallsLoseTooLittle) {
  for (int w = 0; w < 4; ++w) {
    Calls(0, 20, 4);  // 2 calls of 40 at 4x: 6 ms of 46, 13 %
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

// Launched onto an empty queue, a call's time includes any host delay
// between its timing event and its launch (a busy host): not judged.
TEST_F(IntermittentTest, CallsLaunchedOntoAnEmptyQueueAreNotJudged) {
  for (int w = 0; w < 4; ++w) {
    Calls(0, 4, 8, /*queue_us=*/20);
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

// The slow calls share the device with the rank's own kernels on another
// stream: the job's concurrency (extra_gpu_work), not another process.
TEST_F(IntermittentTest, CallsOverlappingTheRanksOwnSideStreamAreNotJudged) {
  for (int w = 0; w < 4; ++w) {
    Calls(0, 4, 8, 5000, /*side_stream_every=*/4);
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

// Two ranks: the shared one is named; its peer's calls are steady.
TEST_F(IntermittentTest, TwoRanksTheSharedOneIsNamed) {
  for (int w = 0; w < 2; ++w) {
    Calls(0, 0, 1);
    Calls(1, 3, 10);
    std::vector<Diagnosis> out = Window();
    if (w == 0) {
      EXPECT_TRUE(out.empty());
      continue;
    }
    ASSERT_EQ(out.size(), 1u);
    EXPECT_THAT(out[0].ranks, ElementsAre(1));
  }
}

}  // namespace
}  // namespace xpu::engine
