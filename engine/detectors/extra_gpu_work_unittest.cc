#include "engine/detectors/extra_gpu_work.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kStep = 1, kGemm = 2, kSide = 3, kAllReduce = 4, kHead = 5, kSend = 6;
constexpr uint64_t kStepNs = 10 * kMs;

// What one rank does in each 10 ms step besides its eight 800 us GEMMs and
// one all-reduce.
struct Work {
  int side_gemms = 0;          // extra 300 us GEMMs of another shape on stream 2
  double gemm_factor = 1;      // its GEMMs take this much longer (a slow GPU)
  bool last_stage = false;     // a pipeline's last stage: an LM head and a send
};

class ExtraGpuWorkTest : public ::testing::Test {
 protected:
  std::vector<Diagnosis> Window(int n, const std::map<int, Work>& special = {}) {
    for (int r = 0; r < n; ++r) {
      const Work w = special.count(r) ? special.at(r) : Work{};
      job_.Rank(r, "", "Test GPU");
      job_.Define(r, HostSig(kStep, XPU_OP_STEP));
      job_.Define(r, GemmSig(kGemm, 4096, 4096, 4096));
      job_.Define(r, GemmSig(kSide, 8192, 8192, 8192));
      job_.Define(r, GemmSig(kHead, 4096, 4096, 32000));
      job_.Define(r, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 9, r, n));
      if (w.last_stage) job_.Define(r, CollSig(kSend, XPU_OP_SEND, 1 << 16, 10, 1, 2, 0));
      for (int s = 0; s <= 5; ++s) {
        const uint64_t t = t_ + s * kStepNs;
        job_.Add(r, Host(kStep, t, kUs, step_ + s));
        if (s == 5) break;
        for (int i = 0; i < 8; ++i) {
          job_.Add(r, Timed(kGemm, t + i * kMs, static_cast<uint64_t>(800 * kUs * w.gemm_factor),
                            s * 8 + i, 100 * kUs));
        }
        for (int i = 0; i < w.side_gemms; ++i) {
          job_.Add(r, Timed(kSide, t + i * 300 * kUs, 300 * kUs, s * 10 + i, 100 * kUs, 2));
        }
        if (w.last_stage) {
          job_.Add(r, Timed(kHead, t + 8 * kMs, 500 * kUs, s, 100 * kUs));
          job_.Add(r, Timed(kSend, t + 8600 * kUs, 100 * kUs, s, 10 * kUs, 3));
        }
        job_.Add(r, Timed(kAllReduce, t + 9 * kMs, 500 * kUs, s, 10 * kUs, 3));
      }
    }
    t_ += kSec;
    step_ += 6;
    job_.CloseWindow();
    return Diagnose(*detector_, job_);
  }

  TestJob job_;
  uint64_t t_ = kSec;
  int step_ = 0;
  std::unique_ptr<ExtraGpuWorkDetector> detector_ =
      std::make_unique<ExtraGpuWorkDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(ExtraGpuWorkTest, HealthyReplicasAreSilent) {
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(4).empty()) << "window " << w;
}

// One rank of two runs five extra GEMMs per step on a second stream (1.5 ms
// of a 10 ms step): named once it persists, the other rank is not.
TEST_F(ExtraGpuWorkTest, ExtraGemmsOnOneRankAreNamed) {
  const std::map<int, Work> side = {{1, Work{5}}};
  EXPECT_TRUE(Window(2, side).empty());  // extra_work.persist_windows = 2
  std::vector<Diagnosis> out = Window(2, side);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, "extra_gpu_work");
  EXPECT_EQ(out[0].team, Team::kAlgorithm);
  EXPECT_THAT(out[0].ranks, ElementsAre(1));
  EXPECT_THAT(out[0].evidence,
              HasSubstr("rank 1: 5.0 more GPU calls per step than its 1 peer(s), 1.50 ms per "
                        "10.0 ms step (15.0 %), most from 5.0 x "));
  EXPECT_THAT(out[0].evidence, HasSubstr("|8192x8192x8192x1|"));
  // Among eight ranks the median of the others is the reference.
  const std::map<int, Work> one = {{6, Work{5}}};
  Window(8, one);
  out = Window(8, one);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].ranks, ElementsAre(6));
}

// A slower GPU makes the same calls last longer: not extra work.
TEST_F(ExtraGpuWorkTest, SlowerCallsAreNotExtraWork) {
  const std::map<int, Work> slow = {{2, Work{0, 1.5}}};
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(4, slow).empty()) << "window " << w;
}

// A pipeline's last stage runs an LM head the others do not, but its
// collectives differ (a send): another role, not compared with them. Two
// last-stage ranks are peers of each other, and both run the head.
TEST_F(ExtraGpuWorkTest, RanksOfAnotherRoleAreNotPeers) {
  Work last;
  last.last_stage = true;
  const std::map<int, Work> stages = {{3, last}, {7, last}};
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(8, stages).empty()) << "window " << w;
  // A little extra (under 5 % of the step) is not named either.
  const std::map<int, Work> little = {{1, Work{1}}};
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(Window(4, little).empty()) << "window " << w;
}

}  // namespace
}  // namespace xpu::engine
