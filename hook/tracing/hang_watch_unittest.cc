// hook/tracing/hang_watch_unittest.cc — the hang watch against a header page
// and a signature table in plain memory; the test plays the completion thread.
#include "hook/tracing/hang_watch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace xpu::hook {
namespace {

constexpr uint64_t kS = 1000000000ull;

class HangWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    page_.assign(XPU_RING_HEADER_SIZE, 0);
    sigs_.assign(16, xpu_signature_v1{});
    AddSig(1, XPU_OP_ALLREDUCE, 0xabc, 1024, XPU_DT_BF16);
    AddSig(2, XPU_OP_KERNEL, 0, 0, XPU_DT_UNKNOWN);
    AddSig(3, XPU_OP_ALLGATHER, 0xdef, 256, XPU_DT_F32);
  }
  void AddSig(uint32_t id, uint16_t kind, uint64_t comm, uint64_t count, uint8_t dt) {
    xpu_signature_v1& s = sigs_[id];
    s.kind = kind;
    s.comm_id = comm;
    s.count = count;
    s.dtype = dt;
    s.comm_rank = 3;
    s.comm_nranks = 8;
    s.commit = id;
  }
  xpu_ring_progress_v1* progress() {
    return reinterpret_cast<xpu_ring_progress_v1*>(page_.data() + XPU_RING_PROGRESS_OFFSET);
  }
  void Init(uint64_t floor_s, double multiple) {
    HangWatchOptions o;
    o.floor_ns = floor_s * kS;
    o.multiple = multiple;
    o.decay_ns = 100 * kS;
    w_.Init(progress(), sigs_.data(), static_cast<uint32_t>(sigs_.size()), o);
  }
  std::vector<uint8_t> page_;
  std::vector<xpu_signature_v1> sigs_;
  HangWatch w_;
};

TEST_F(HangWatchTest, TracksIssuedAndCompletedSeqPerCommunicator) {
  Init(10, 4);
  EXPECT_EQ(progress()->magic, XPU_RING_PROGRESS_MAGIC);
  w_.OnIssued({1, 1, 100}, 100);
  w_.OnIssued({3, 1, 110}, 110);
  w_.OnIssued({1, 2, 120}, 120);
  const xpu_comm_progress_v1& c0 = progress()->comms[0];
  const xpu_comm_progress_v1& c1 = progress()->comms[1];
  EXPECT_EQ(c0.comm_id, 0xabcu);
  EXPECT_EQ(c0.last_issued_seq, 2u);
  EXPECT_EQ(c0.last_completed_seq, 0u);
  EXPECT_EQ(c0.pending_seq, 1u);
  EXPECT_EQ(c0.pending_kind, XPU_OP_ALLREDUCE);
  EXPECT_EQ(c0.pending_bytes, 2048u);
  EXPECT_EQ(c0.comm_nranks, 8);
  EXPECT_EQ(c1.comm_id, 0xdefu);
  w_.OnCompleted({1, 1, 100}, 50, 150);
  EXPECT_EQ(c0.last_completed_seq, 1u);
  EXPECT_EQ(c0.pending_seq, 2u);
  w_.OnCompleted({1, 2, 120}, 50, 170);
  EXPECT_EQ(c0.last_completed_seq, 2u);
  EXPECT_EQ(c0.pending_seq, 0u);
  EXPECT_EQ(c0.gen % 2, 0u);
  // Non-collective ops never create communicator entries.
  w_.OnIssued({2, 7, 200}, 200);
  EXPECT_EQ(progress()->comms[2].comm_id, 0u);
}

TEST_F(HangWatchTest, SuspectsOpOutstandingBeyondFloorAndClearsOnCompletion) {
  Init(10, 4);
  const uint64_t t0 = 1000 * kS;
  w_.OnIssued({1, 5, t0, 3}, t0);
  WatchedOp head{1, 5, t0, 3};
  w_.Check(&head, 1, t0 + 9 * kS);
  EXPECT_EQ(progress()->suspect_sig_id, 0u);
  EXPECT_EQ(progress()->comms[0].flags, 0u);
  w_.Check(&head, 1, t0 + 11 * kS);
  EXPECT_EQ(progress()->suspect_sig_id, 1u);
  EXPECT_EQ(progress()->suspect_seq, 5u);
  EXPECT_EQ(progress()->suspect_stream, 3u);
  EXPECT_EQ(progress()->suspect_since_ns, t0);
  EXPECT_EQ(progress()->suspect_detected_ns, t0 + 11 * kS);
  EXPECT_EQ(progress()->suspect_comm_id, 0xabcu);
  EXPECT_EQ(progress()->suspects_total, 1u);
  EXPECT_EQ(progress()->comms[0].flags, XPU_PROGRESS_SUSPECT);
  // Raised once per op, not per check.
  w_.Check(&head, 1, t0 + 12 * kS);
  EXPECT_EQ(progress()->suspects_total, 1u);
  w_.OnCompleted(head, 13 * kS, t0 + 13 * kS);
  EXPECT_EQ(progress()->suspect_sig_id, 0u);
  w_.Check(nullptr, 0, t0 + 14 * kS);
  EXPECT_EQ(progress()->comms[0].flags, 0u);
}

TEST_F(HangWatchTest, ThresholdScalesWithRecentMaximumAndDecays) {
  Init(10, 4);
  const uint64_t t0 = 1000 * kS;
  // A signature that normally takes 5 s: threshold 20 s, not the 10 s floor.
  w_.OnCompleted({2, 1, t0}, 5 * kS, t0 + 5 * kS);
  EXPECT_EQ(w_.ThresholdNs(2, t0 + 5 * kS), 20 * kS);
  WatchedOp head{2, 2, t0 + 10 * kS};
  w_.Check(&head, 1, t0 + 25 * kS);  // 15 s outstanding: below 20 s
  EXPECT_EQ(progress()->suspect_sig_id, 0u);
  w_.Check(&head, 1, t0 + 31 * kS);  // 21 s
  EXPECT_EQ(progress()->suspect_sig_id, 2u);
  EXPECT_EQ(progress()->suspect_threshold_ns, 20 * kS);
  EXPECT_EQ(progress()->suspect_comm_id, 0u);
  // After one decay period the remembered maximum is halved: floor again.
  EXPECT_EQ(w_.ThresholdNs(2, t0 + 105 * kS), 10 * kS);
}

TEST_F(HangWatchTest, AStallDoesNotHideTheNextOne) {
  Init(5, 4);
  const uint64_t t0 = 1000 * kS;
  // Normally 10 ms: the 5 s floor applies.
  w_.OnCompleted({1, 1, t0}, kS / 100, t0 + kS);
  EXPECT_EQ(w_.ThresholdNs(1, t0 + kS), 5 * kS);
  // A peer was stopped for 30 s: the op completes after the stall. It counts
  // as long as the threshold it broke (5 s), not 30 s: the next stall is
  // seen after 20 s, not after 120 s.
  w_.OnCompleted({1, 2, t0 + 2 * kS}, 30 * kS, t0 + 32 * kS);
  EXPECT_EQ(w_.ThresholdNs(1, t0 + 32 * kS), 20 * kS);
  WatchedOp head{1, 3, t0 + 40 * kS};
  w_.OnIssued(head, t0 + 40 * kS);
  w_.Check(&head, 1, t0 + 61 * kS);
  EXPECT_EQ(progress()->suspect_sig_id, 1u);
  // An op that is always 8 s long earns its threshold in one occurrence
  // and is then never suspected.
  w_.OnCompleted({3, 1, t0}, 8 * kS, t0 + 8 * kS);
  EXPECT_EQ(w_.ThresholdNs(3, t0 + 8 * kS), 20 * kS);
  w_.OnCompleted({3, 2, t0 + 9 * kS}, 8 * kS, t0 + 17 * kS);
  EXPECT_EQ(w_.ThresholdNs(3, t0 + 17 * kS), 32 * kS);
}

TEST_F(HangWatchTest, DisabledWithZeroFloorOrNoTable) {
  Init(0, 4);
  EXPECT_FALSE(w_.enabled());
  w_.OnIssued({1, 1, 1}, 1);
  EXPECT_EQ(progress()->comms[0].comm_id, 0u);
  HangWatch none;
  none.Init(nullptr, sigs_.data(), 16, HangWatchOptions{});
  EXPECT_FALSE(none.enabled());
  none.Check(nullptr, 0, 5);
}

TEST_F(HangWatchTest, UnpublishedSignaturesAreIgnored) {
  Init(10, 4);
  sigs_[1].commit = 0;  // not yet published
  w_.OnIssued({1, 1, 1}, 1);
  EXPECT_EQ(progress()->comms[0].comm_id, 0u);
  w_.OnIssued({99, 1, 1}, 1);  // out of range
  EXPECT_EQ(progress()->comms[0].comm_id, 0u);
}

TEST(HangWatchOptionsTest, Environment) {
  setenv("XPU_HANG_FLOOR_S", "2.5", 1);
  setenv("XPU_HANG_MULTIPLE", "bogus", 1);
  HangWatchOptions o = HangWatchOptionsFromEnv();
  EXPECT_EQ(o.floor_ns, 2500000000ull);
  EXPECT_EQ(o.multiple, 4.0);
  unsetenv("XPU_HANG_FLOOR_S");
  unsetenv("XPU_HANG_MULTIPLE");
  EXPECT_EQ(HangWatchOptionsFromEnv().floor_ns, 5 * kS);
}

}  // namespace
}  // namespace xpu::hook
