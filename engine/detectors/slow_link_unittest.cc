#include "engine/detectors/slow_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

constexpr uint32_t kSend = 1, kRecv = 2, kGemm = 3, kFirstComm = 10;
constexpr uint64_t k8MiBElements = 4 << 20;   // bf16: 8 MiB
constexpr uint64_t k16MiBElements = 8 << 20;  // bf16: 16 MiB
constexpr int kPerWindow = 5;                 // instances of each op per window

class SlowLinkTest : public ::testing::Test {
 protected:
  void UseDetector(std::shared_ptr<const DetectorConfig> config,
                   std::shared_ptr<history::HistoryCache> history = nullptr) {
    detector_ = std::make_unique<SlowLinkDetector>(std::make_shared<WindowViews>(),
                                                   std::move(config), std::move(history));
  }
  std::vector<Diagnosis> Window() {
    job_.CloseWindow();
    t_ += kSec;
    return Diagnose(*detector_, job_);
  }
  // A ring of `n` ranks (4 per host): rank r sends 8 MiB to r+1 and
  // receives from r-1, kPerWindow times; a transfer takes 1 ms, or
  // `slow_ns` on the links of `slow_rank`.
  void Ring(int n, int slow_rank = -1, uint64_t slow_ns = 3 * kMs) {
    for (int r = 0; r < n; ++r) {
      job_.Define(r, CollSig(kSend, XPU_OP_SEND, k8MiBElements, 50, r, n, (r + 1) % n));
      job_.Define(r, CollSig(kRecv, XPU_OP_RECV, k8MiBElements, 50, r, n, (r + n - 1) % n));
    }
    for (int i = 0; i < kPerWindow; ++i) {
      const uint64_t t = t_ + i * 20 * kMs;
      for (int src = 0; src < n; ++src) {
        const int dst = (src + 1) % n;
        const uint64_t dur = src == slow_rank || dst == slow_rank ? slow_ns : kMs;
        job_.Add(src, Timed(kSend, t, dur, i));
        job_.Add(dst, Timed(kRecv, t, dur, i));
      }
    }
  }
  // kPerWindow all-reduces of `elements` bf16 on communicator `comm` whose
  // members are `ranks` (in communicator-rank order), each taking `dur_ns`
  // on every member.
  void AllReduces(uint64_t comm, const std::vector<int>& ranks, uint64_t dur_ns,
                  uint64_t elements = k16MiBElements) {
    const uint32_t sig = kFirstComm + static_cast<uint32_t>(comm);
    for (size_t c = 0; c < ranks.size(); ++c) {
      job_.Define(ranks[c], CollSig(sig, XPU_OP_ALLREDUCE, elements, comm, static_cast<int>(c),
                                    static_cast<int>(ranks.size())));
    }
    for (int i = 0; i < kPerWindow; ++i) {
      for (int r : ranks) job_.Add(r, Timed(sig, t_ + comm * kMs + i * 50 * kMs, dur_ns, i));
    }
  }
  // Every pair of ranks 0..3 is a two-rank communicator (ids 1..6); those
  // with `slow_rank` take three times as long.
  void AllPairs(int slow_rank) {
    uint64_t comm = 1;
    for (int a = 0; a < 4; ++a) {
      for (int b = a + 1; b < 4; ++b, ++comm) {
        AllReduces(comm, {a, b}, a == slow_rank || b == slow_rank ? 6 * kMs : 2 * kMs);
      }
    }
  }
  void Gemms(int rank, uint64_t dur_ns) {
    job_.Define(rank, GemmSig(kGemm, 4096, 4096, 4096));
    for (int i = 0; i < 5; ++i) job_.Add(rank, Timed(kGemm, t_ + 500 * kMs + i * 10 * kMs, dur_ns));
  }

  TestJob job_;
  uint64_t t_ = kSec;
  std::unique_ptr<SlowLinkDetector> detector_ =
      std::make_unique<SlowLinkDetector>(std::make_shared<WindowViews>(), Config());
};

TEST_F(SlowLinkTest, HealthyRingAndCommunicatorsAreSilent) {
  for (int w = 0; w < 4; ++w) {
    Ring(8);
    AllPairs(-1);
    EXPECT_TRUE(Window().empty()) << "window " << w;
  }
}

TEST_F(SlowLinkTest, OneRingMemberTouchingEverySlowLink) {
  Ring(8, /*slow_rank=*/4);
  EXPECT_TRUE(Window().empty());  // slow_link.persist_windows = 2
  Ring(8, 4);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.kind, "slow_link");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_EQ(d.subject, "rank:4");
  EXPECT_THAT(d.ranks, ElementsAre(4));
  EXPECT_THAT(d.hosts, ElementsAre("node1"));
  EXPECT_EQ(d.severity, Severity::kCritical);  // a third of the median link
  EXPECT_EQ(d.evidence,
            "one slow ring member: rank 4 on node1 touches all 2 slow point-to-point links "
            "(3->4 2.80 GB/s (node0 to node1); 4->5 2.80 GB/s (within node1)) vs median link "
            "8.39 GB/s over 8 links; intra- and inter-node; links not touching it are at the "
            "median");
}

TEST_F(SlowLinkTest, OneSlowLinkCannotBeSplitBetweenItsEnds) {
  // Only the 2 -> 3 transfers are slow (a cable, not a member): both ends
  // are named, as links.
  for (int w = 0; w < 2; ++w) {
    for (int r = 0; r < 8; ++r) {
      job_.Define(r, CollSig(kSend, XPU_OP_SEND, k8MiBElements, 50, r, 8, (r + 1) % 8));
      job_.Define(r, CollSig(kRecv, XPU_OP_RECV, k8MiBElements, 50, r, 8, (r + 7) % 8));
    }
    for (int i = 0; i < kPerWindow; ++i) {
      for (int src = 0; src < 8; ++src) {
        const uint64_t dur = src == 2 ? 2 * kMs : kMs;
        job_.Add(src, Timed(kSend, t_ + i * 20 * kMs, dur, i));
        job_.Add((src + 1) % 8, Timed(kRecv, t_ + i * 20 * kMs, dur, i));
      }
    }
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "links:2,3");
  EXPECT_THAT(out[0].ranks, ElementsAre(2, 3));
  EXPECT_EQ(out[0].severity, Severity::kWarning);  // half the median: not below it
  EXPECT_THAT(out[0].evidence, HasSubstr("1 slow point-to-point links without a common member "
                                         "(2->3 4.19 GB/s (within node0)) vs median link "
                                         "8.39 GB/s; intra-node"));
}

TEST_F(SlowLinkTest, MemberCommonToEverySlowCommunicator) {
  AllPairs(/*slow_rank=*/2);
  EXPECT_TRUE(Window().empty());
  AllPairs(2);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.subject, "rank:2");
  EXPECT_THAT(d.ranks, ElementsAre(2));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_THAT(d.evidence, HasSubstr("3 of 6 communicators of class "));
  // busbw = 16 MiB / 6 ms (two ranks: factor 1); the median sits between
  // the slow and the healthy ones.
  EXPECT_THAT(d.evidence, HasSubstr(" are slow: busbw 2.80 GB/s vs median 5.59 GB/s; rank(s) 2 "
                                    "are in every slow communicator and in no healthy one; "
                                    "intra-node communicators"));
}

TEST_F(SlowLinkTest, SlowRingMemberExplainsItsSlowCommunicators) {
  // Rank 2 slows both its ring links and its communicators: one diagnosis.
  for (int w = 0; w < 2; ++w) {
    Ring(8, 2);
    AllPairs(2);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "rank:2");
  EXPECT_THAT(out[0].evidence, HasSubstr("one slow ring member"));
}

TEST_F(SlowLinkTest, SlowMemberExplainsALargerCommunicatorItSlows) {
  // Rank 2's links are slow; the 8-rank all-reduce it is in falls below the
  // expected busbw too. The communicator holds ranks nobody singled out,
  // but the slow member explains it: one diagnosis, the member's.
  UseDetector(Config({{"slow_link.expected_busbw_gbps", 20}}));
  for (int w = 0; w < 2; ++w) {
    Ring(8, 2);
    AllReduces(9, {0, 1, 2, 3, 4, 5, 6, 7}, 5 * kMs);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "rank:2");
}

TEST_F(SlowLinkTest, CommunicatorBelowTheExpectedBusBw) {
  UseDetector(Config({{"slow_link.expected_busbw_gbps", 20}}));
  for (int w = 0; w < 2; ++w) {
    // 16 MiB all-reduce on 4 ranks in 5 ms: busbw 16 MiB x 1.5 / 5 ms.
    AllReduces(7, {0, 1, 2, 3}, 5 * kMs);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.subject, "comm:7");
  EXPECT_THAT(d.ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(d.hosts, ElementsAre("node0"));
  EXPECT_EQ(d.severity, Severity::kCritical);
  EXPECT_EQ(d.evidence,
            "slow ring: communicator 7 (4 ranks, intra-node) allreduce of 16777216 bytes at busbw "
            "5.03 GB/s (last-arrival, 5 collectives) vs expected 20.00 GB/s; no single member can "
            "be singled out");
}

TEST_F(SlowLinkTest, SlowRingNamesAMemberWhoseGemmsAreSlowToo) {
  UseDetector(Config({{"slow_link.expected_busbw_gbps", 20}}));
  for (int w = 0; w < 2; ++w) {
    AllReduces(7, {0, 1, 2, 3}, 5 * kMs);
    for (int r = 0; r < 4; ++r) Gemms(r, r == 3 ? 2 * kMs : kMs);
    if (w == 0) {
      EXPECT_TRUE(Window().empty());
    }
  }
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].evidence,
              HasSubstr("; but rank 3's GEMMs run at 0.50x the other members' on the same shapes"));
}

TEST_F(SlowLinkTest, SmallCollectivesAreNotCompared) {
  UseDetector(Config({{"slow_link.expected_busbw_gbps", 20}}));
  for (int w = 0; w < 3; ++w) {
    // 256 KiB: latency-bound, under slow_link.min_bytes.
    AllReduces(7, {0, 1, 2, 3}, 5 * kMs, 128 << 10);
    EXPECT_TRUE(Window().empty());
  }
}

TEST_F(SlowLinkTest, CommunicatorAgainstItsOwnFirstWindows) {
  // history.baseline_windows = 2 windows at 2 ms, then 5x slower.
  for (int w = 0; w < 2; ++w) {
    AllReduces(7, {0, 1, 2, 3}, 2 * kMs);
    EXPECT_TRUE(Window().empty());
  }
  AllReduces(7, {0, 1, 2, 3}, 10 * kMs);
  EXPECT_TRUE(Window().empty());
  AllReduces(7, {0, 1, 2, 3}, 10 * kMs);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].subject, "comm:7");
  EXPECT_THAT(out[0].evidence, HasSubstr("at busbw 2.52 GB/s (last-arrival, 5 collectives) vs its "
                                         "baseline 12.58 GB/s"));
}

TEST_F(SlowLinkTest, CalibrationAllowsALargerDrop) {
  auto source = std::make_shared<FixedHistory>();
  history::CollectiveCalibrationRow row;
  row.gpu_model = "Test GPU";
  row.host = "calib-host";
  row.shape = history::CollectiveShape{"allreduce", 16 << 20, 4, 1};
  row.busbw = 20e9;
  source->calibration.collectives.push_back(row);
  UseDetector(Config(), std::make_shared<history::HistoryCache>(source, Config()));
  for (int r = 0; r < 4; ++r) job_.Rank(r, "", "Test GPU");
  // 12.6 GB/s: 37 % below the calibration, within calibrated_min_drop (50 %).
  for (int w = 0; w < 3; ++w) {
    AllReduces(7, {0, 1, 2, 3}, 2 * kMs);
    EXPECT_TRUE(Window().empty());
  }
  // 5.03 GB/s: 75 % below.
  AllReduces(7, {0, 1, 2, 3}, 5 * kMs);
  EXPECT_TRUE(Window().empty());
  AllReduces(7, {0, 1, 2, 3}, 5 * kMs);
  std::vector<Diagnosis> out = Window();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].evidence, HasSubstr("vs calibrated 20.00 GB/s ("));
  EXPECT_THAT(out[0].evidence, Not(HasSubstr("baseline")));
}

}  // namespace
}  // namespace xpu::engine
