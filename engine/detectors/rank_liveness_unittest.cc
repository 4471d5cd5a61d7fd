#include "engine/detectors/rank_liveness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint64_t kSilentAfter = 30 * kSec;

class RankLivenessTest : public ::testing::Test {
 protected:
  RankLivenessTest() {
    for (int r = 0; r < 4; ++r) {
      job_.Rank(r, r < 2 ? "node-a" : "node-b");
      job_.Define(r, KernelSig(1));
    }
  }
  // A record from each rank of `ranks`, received now.
  void Records(const std::vector<int>& ranks) {
    for (int r : ranks) job_.Add(r, Timed(1, job_.now(), kUs));
  }
  // Closes the window `after_ns` later and marks silent the ranks that sent
  // nothing for kSilentAfter, as the engine's tick does.
  std::vector<Diagnosis> Window(uint64_t after_ns) {
    job_.CloseWindow(after_ns);
    job_.state().UpdateLiveness(job_.now(), kSilentAfter);
    return Diagnose(detector_, job_);
  }

  TestJob job_;
  RankLivenessDetector detector_{kSilentAfter};
};

TEST_F(RankLivenessTest, RanksThatKeepSendingAreSilent) {
  Records({0, 1, 2, 3});
  EXPECT_TRUE(Window(20 * kSec).empty());
  Records({0, 1, 2, 3});
  EXPECT_TRUE(Window(20 * kSec).empty());
}

TEST_F(RankLivenessTest, OneSilentRankIsAWarning) {
  const uint64_t last = job_.now();
  Records({0, 1, 2, 3});
  EXPECT_TRUE(Window(10 * kSec).empty());
  Records({0, 1, 3});
  std::vector<Diagnosis> out = Window(25 * kSec);  // rank 2: 35 s without a record
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "rank_silent");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_THAT(d.ranks, ElementsAre(2));
  EXPECT_THAT(d.hosts, ElementsAre("node-b"));
  EXPECT_EQ(d.subject, "rank:2");
  EXPECT_EQ(d.evidence,
            "1 of 4 live processes sent no records for more than 30 s (longest 35 s): rank:2 on "
            "node-b");
  EXPECT_EQ(d.first_seen_ns, last + kSilentAfter);
  EXPECT_EQ(d.last_seen_ns, job_.now());
  // It speaks again: silent no more.
  Records({0, 1, 2, 3});
  EXPECT_TRUE(Window(5 * kSec).empty());
}

TEST_F(RankLivenessTest, EveryLiveRankSilentIsCritical) {
  Records({0, 1, 2, 3});
  // Rank 3 exited: not expected to send anything, not counted as live.
  xpu::v1::ProcessBatch exit;
  exit.set_exited(true);
  job_.state().ApplyCounters(job_.Rank(3), exit, job_.now());
  std::vector<Diagnosis> out = Window(40 * kSec);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].severity, Severity::kCritical);
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2));
  EXPECT_THAT(out[0].hosts, ElementsAre("node-a", "node-b"));
  EXPECT_EQ(out[0].subject, "rank:0,rank:1,rank:2");
  EXPECT_EQ(out[0].evidence,
            "3 of 3 live processes sent no records for more than 30 s (longest 40 s): rank:0, "
            "rank:1, rank:2 on node-a, node-b");
}

}  // namespace
}  // namespace xpu::engine
