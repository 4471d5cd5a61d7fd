#include "engine/state/collective_table.h"

#include <gtest/gtest.h>

#include "engine/state/batch_builder.h"
#include "engine/state/job_state.h"
#include "xpu/formulas.h"

namespace xpu::engine {
namespace {

SignatureInfo AllReduce(int comm_rank, int nranks, uint64_t count) {
  return ToSignatureInfo(
      MakeCollectiveSignature(1, XPU_OP_ALLREDUCE, count, XPU_DT_F32, 5, comm_rank, nranks));
}

TEST(CollectiveTableTest, LastArrivalBusBandwidth) {
  CollectiveTable t;
  // 4 ranks, 256 MiB allreduce; starts at 0, 10, 20, 30 us; all end at 1030 us.
  const uint64_t count = 64ull << 20;  // f32 -> 256 MiB
  for (int r = 0; r < 4; ++r) {
    uint64_t start = 10000ull * r;
    t.Add(AllReduce(r, 4, count), r,
          MakeRecord(1, start, static_cast<uint32_t>(1030000 - start), 7));
  }
  const CollectiveEntry* e = t.Find(5, 7);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->complete);
  EXPECT_EQ(e->members.size(), 4u);
  auto done = t.TakeCompleted();
  ASSERT_EQ(done.count(XPU_OP_ALLREDUCE), 1u);
  const OpBandwidth& bw = done[XPU_OP_ALLREDUCE];
  EXPECT_EQ(bw.count, 1u);
  // time = last end (1030 us) - last start (30 us) = 1 ms.
  const double bytes = count * 4.0;
  EXPECT_NEAR(bw.BusBw(), bytes * 2.0 * 3 / 4 / 1e-3, 1.0);
  EXPECT_TRUE(t.TakeCompleted().empty());
}

TEST(CollectiveTableTest, IncompleteOrUntimedDoNotCount) {
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 1));
  EXPECT_TRUE(t.TakeCompleted().empty());
  EXPECT_FALSE(t.Find(5, 1)->complete);
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 2));
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 0, 100, 2, XPU_REC_NOT_TIMED));
  EXPECT_FALSE(t.Find(5, 2)->complete);  // a timing record may still come
  EXPECT_TRUE(t.TakeCompleted().empty());
}

TEST(CollectiveTableTest, PluginTimingRecordCompletesAnOccurrence) {
  // With the NCCL profiler plugin each member sends the interposer's untimed
  // record and the plugin's timed one for the same seq, in either order.
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 500, 3, XPU_REC_NOT_TIMED));
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 10, 100, 3, XPU_REC_PLUGIN | XPU_REC_TIMED));
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 20, 100, 3, XPU_REC_PLUGIN | XPU_REC_TIMED));
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 0, 500, 3, XPU_REC_NOT_TIMED));
  const CollectiveEntry* e = t.Find(5, 3);
  ASSERT_EQ(e->members.size(), 2u);
  EXPECT_TRUE(e->members[0].timed);
  EXPECT_TRUE(e->members[1].timed);  // the later untimed record did not replace it
  EXPECT_TRUE(e->complete);
  auto done = t.TakeCompleted();
  ASSERT_EQ(done.count(XPU_OP_ALLREDUCE), 1u);
  EXPECT_EQ(done[XPU_OP_ALLREDUCE].count, 1u);
}

TEST(CollectiveTableTest, DuplicateMemberReplaces) {
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 1));
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 5, 100, 1));
  const CollectiveEntry* e = t.Find(5, 1);
  ASSERT_EQ(e->members.size(), 1u);
  EXPECT_EQ(e->members[0].start_ns, 5u);
  EXPECT_FALSE(e->complete);
}

TEST(CollectiveTableTest, BoundedPerCommunicator) {
  CollectiveTable t(16);
  for (uint32_t s = 1; s <= 100; ++s) t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, s, 1, s));
  EXPECT_EQ(t.size(), 16u);
  EXPECT_EQ(t.Find(5, 84), nullptr);
  EXPECT_NE(t.Find(5, 85), nullptr);
}

TEST(RecordRingTest, KeepsNewestInOrder) {
  RecordRing ring(8);
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 13; ++i) recs.push_back(MakeRecord(1, i, 1, i));
  ring.Append(recs.data(), 5);
  ring.Append(recs.data() + 5, 8);
  auto last = ring.Last(100);
  ASSERT_EQ(last.size(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(last[i].seq, 5 + i);
  RecordRing big(4);
  big.Append(recs.data(), 13);  // more than capacity at once
  auto l2 = big.Last(4);
  ASSERT_EQ(l2.size(), 4u);
  EXPECT_EQ(l2.front().seq, 9u);
  EXPECT_EQ(l2.back().seq, 12u);
}

}  // namespace
}  // namespace xpu::engine
