#include "engine/state/collective_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

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
  EXPECT_EQ(t.Find(5, 7), nullptr);  // completed: no longer in flight
  EXPECT_TRUE(t.Completed(5, 7));
  EXPECT_EQ(t.size(), 0u);
  auto done = t.TakeCompleted();
  ASSERT_EQ(done.count(XPU_OP_ALLREDUCE), 1u);
  const OpBandwidth& bw = done[XPU_OP_ALLREDUCE];
  EXPECT_EQ(bw.count, 1u);
  // time = last end (1030 us) - last start (30 us) = 1 ms.
  const double bytes = count * 4.0;
  EXPECT_NEAR(bw.BusBw(), bytes * 2.0 * 3 / 4 / 1e-3, 1.0);
  EXPECT_TRUE(t.TakeCompleted().empty());
}

TEST(CollectiveTableTest, ShapesOfRecentCollectivesAreKept) {
  CollectiveTable t;
  const uint32_t last = 700;
  for (uint32_t seq = 1; seq <= last; ++seq) {
    const uint64_t count = 1024 * (1 + seq % 3);  // a 3-collective step
    // Every other one is timed on one member only (sampled timing): it stays
    // in flight until newer ones push it out, and its shape is still kept.
    t.Add(AllReduce(0, 2, count), 0, MakeRecord(1, 0, 100, seq));
    t.Add(AllReduce(1, 2, count), 1,
          MakeRecord(1, 0, 100, seq, seq % 2 ? XPU_REC_TIMED : XPU_REC_NOT_TIMED));
  }
  t.Add(AllReduce(0, 2, 77), 0, MakeRecord(1, 0, 100, last + 1));  // in flight
  EXPECT_EQ(t.Find(5, last - 1), nullptr);                         // completed
  CollectiveShape s;
  ASSERT_TRUE(t.Shape(5, last, &s));
  EXPECT_EQ(s.seq, last);
  EXPECT_EQ(s.kind, XPU_OP_ALLREDUCE);
  EXPECT_EQ(s.nranks, 2);
  EXPECT_EQ(s.bytes, 4u * 1024 * (1 + last % 3));
  const uint32_t oldest =
      (last + 1) - CollectiveTable::kShapeHistory + 1;  // last + 1 is the newest
  ASSERT_TRUE(t.Shape(5, oldest, &s));
  EXPECT_EQ(s.bytes, 4u * 1024 * (1 + oldest % 3));
  EXPECT_EQ(t.Find(5, 500), nullptr);  // never timed by both, pushed out of the table
  ASSERT_TRUE(t.Shape(5, 500, &s));
  EXPECT_EQ(s.bytes, 4u * 1024 * (1 + 500 % 3));
  EXPECT_FALSE(t.Shape(5, oldest - 1, &s));  // beyond the history
  ASSERT_TRUE(t.Shape(5, last + 1, &s));     // in flight
  EXPECT_EQ(s.bytes, 4u * 77);
  EXPECT_FALSE(t.Shape(6, last, &s));  // another communicator
}

// Shapes that never repeat (every collective a new size), seqs skipped and
// seqs that come late: each seq of the history has the shape its first
// member reported, a skipped one none.
TEST(CollectiveTableTest, ShapesThatNeverRepeatAndSkippedSeqs) {
  CollectiveTable t;
  const uint32_t last = 3000;
  for (uint32_t seq = 1; seq <= last; ++seq) {
    if (seq % 7 == 0) continue;  // skipped: comes late below, or never
    t.Add(AllReduce(0, 2, seq), 0, MakeRecord(1, 0, 100, seq));
  }
  for (uint32_t seq = last - 70; seq <= last; ++seq) {
    if (seq % 7 == 0) t.Add(AllReduce(1, 2, seq + 1), 1, MakeRecord(1, 0, 100, seq));
  }
  CollectiveShape s;
  for (uint32_t seq = last - CollectiveTable::kShapeHistory + 1; seq <= last; ++seq) {
    const bool late = seq % 7 == 0 && seq >= last - 70;
    if (seq % 7 == 0 && !late) {
      EXPECT_FALSE(t.Shape(5, seq, &s)) << seq;
      continue;
    }
    ASSERT_TRUE(t.Shape(5, seq, &s)) << seq;
    EXPECT_EQ(s.bytes, 4u * (late ? seq + 1 : seq)) << seq;
  }
  EXPECT_FALSE(t.Shape(5, last - CollectiveTable::kShapeHistory, &s));
  EXPECT_FALSE(t.Shape(5, last + 1, &s));
  // A record of a seq older than the history does not enter it.
  t.Add(AllReduce(1, 2, 9), 1, MakeRecord(1, 0, 100, 7));
  EXPECT_FALSE(t.Shape(5, 7, &s));
}

TEST(CollectiveTableTest, IncompleteOrUntimedDoNotCount) {
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 1));
  EXPECT_TRUE(t.TakeCompleted().empty());
  ASSERT_NE(t.Find(5, 1), nullptr);
  EXPECT_FALSE(t.Completed(5, 1));
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 2));
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 0, 100, 2, XPU_REC_NOT_TIMED));
  const CollectiveEntry* e = t.Find(5, 2);  // a timing record may still come
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->members, 2u);
  EXPECT_EQ(e->timed, 1u);
  EXPECT_TRUE(t.TakeCompleted().empty());
}

TEST(CollectiveTableTest, PluginTimingRecordCompletesAnOccurrence) {
  // With the NCCL profiler plugin each member sends the interposer's untimed
  // record and the plugin's timed one for the same seq, in either order.
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 500, 3, XPU_REC_NOT_TIMED));
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 10, 100, 3, XPU_REC_PLUGIN | XPU_REC_TIMED));
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 20, 100, 3, XPU_REC_PLUGIN | XPU_REC_TIMED));
  EXPECT_TRUE(t.Completed(5, 3));
  // The later untimed record neither reopens nor counts it again.
  t.Add(AllReduce(1, 2, 1024), 1, MakeRecord(1, 0, 500, 3, XPU_REC_NOT_TIMED));
  EXPECT_EQ(t.Find(5, 3), nullptr);
  auto done = t.TakeCompleted();
  ASSERT_EQ(done.count(XPU_OP_ALLREDUCE), 1u);
  EXPECT_EQ(done[XPU_OP_ALLREDUCE].count, 1u);
  // 100 - 10 (the timed records only): 20 -> 120 from the last start.
  EXPECT_NEAR(done[XPU_OP_ALLREDUCE].seconds, 100e-9, 1e-15);
}

TEST(CollectiveTableTest, RepeatedMemberCountsOnce) {
  // A re-sent batch repeats a member's record: it is one member, not two.
  CollectiveTable t;
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 1));
  t.Add(AllReduce(0, 2, 1024), 0, MakeRecord(1, 0, 100, 1));
  const CollectiveEntry* e = t.Find(5, 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->members, 1u);
  EXPECT_EQ(e->timed, 1u);
  EXPECT_TRUE(t.TakeCompleted().empty());
}

TEST(CollectiveTableTest, LargeCommunicatorCostsBitsNotMembers) {
  // 100,000 members: every one is placed by its communicator rank (no scan
  // of the others), and the collective completes with the last.
  CollectiveTable t;
  const int n = 100000;
  for (int r = 0; r < n; ++r) {
    t.Add(AllReduce(r, n, 1 << 20), r, MakeRecord(1, 1000 + r % 7, 5000, 9));
    if (r == n / 2) {
      ASSERT_NE(t.Find(5, 9), nullptr);
      EXPECT_EQ(t.Find(5, 9)->reported_bits.size(), (n + 63u) / 64u);
    }
  }
  EXPECT_TRUE(t.Completed(5, 9));
  EXPECT_EQ(t.TakeCompleted()[XPU_OP_ALLREDUCE].count, 1u);
}

TEST(CollectiveTableTest, UnplaceableRecordsAreSkipped) {
  CollectiveTable t;
  t.Add(AllReduce(-1, 4, 1024), 0, MakeRecord(1, 0, 100, 1));
  t.Add(AllReduce(4, 4, 1024), 0, MakeRecord(1, 0, 100, 1));
  t.Add(AllReduce(0, CollectiveTable::kMaxCommRanks + 1, 1024), 0, MakeRecord(1, 0, 100, 1));
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.skipped(), 3u);
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

TEST(RecordRingTest, GrowsAsUsedAndTrimKeepsTheNewest) {
  constexpr size_t kChunk = RecordRing::kChunkRecords;
  RecordRing ring(65536);
  EXPECT_EQ(ring.allocated(), 0u);
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 400; ++i) recs.push_back(MakeRecord(1, i, 1, i));
  // Window after window of 400 records with 512 kept in between: the ring
  // takes the room of what it holds (512 + 400), rounded to whole chunks.
  size_t most = 0;
  for (int w = 0; w < 6; ++w) {
    ring.Append(recs.data(), recs.size());
    most = std::max(most, ring.allocated());
    EXPECT_LT(ring.allocated(), ring.held() + 2 * kChunk);
    ring.Trim(512);
    EXPECT_LE(ring.held(), 512u);
    EXPECT_LT(ring.allocated(), ring.held() + 2 * kChunk);
    const auto last = ring.Last(1);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].seq, 399u);
  }
  EXPECT_GE(most, 912u);
  EXPECT_LT(most, 912u + 2 * kChunk);
  // A burst is given back down to what is kept.
  for (int i = 0; i < 20; ++i) ring.Append(recs.data(), recs.size());
  EXPECT_GT(ring.allocated(), 4096u);
  ring.Trim(512);
  EXPECT_LT(ring.allocated(), 512u + 2 * kChunk);
  EXPECT_EQ(ring.held(), 512u);
  const auto kept = ring.Last(512);
  ASSERT_EQ(kept.size(), 512u);
  for (size_t i = 0; i < kept.size(); ++i) {  // the newest, in order
    EXPECT_EQ(kept[i].seq, (400 - 512 % 400 + i) % 400) << i;
  }
  ring.Trim(0);
  EXPECT_EQ(ring.allocated(), 0u);
  EXPECT_TRUE(ring.Last(10).empty());
}

TEST(RecordRingTest, AFullRingKeepsItsNewestInChunksItNeeds) {
  constexpr size_t kChunk = RecordRing::kChunkRecords;
  RecordRing ring(100);  // not a whole number of chunks
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 1000; ++i) recs.push_back(MakeRecord(1, i, 1, i));
  // Appended in odd sizes across chunk boundaries, past the capacity many
  // times over: the newest 100 in order, in at most 100 + 2 chunks' room.
  size_t at = 0;
  for (size_t n : {1u, 7u, 31u, 32u, 33u, 64u, 3u, 200u, 5u, 99u, 100u, 101u, 324u}) {
    ring.Append(recs.data() + at, n);
    at += n;
    ASSERT_EQ(ring.held(), std::min<size_t>(at, 100));
    EXPECT_LT(ring.allocated(), ring.held() + 2 * kChunk);
    const auto last = ring.Last(1000);
    ASSERT_EQ(last.size(), ring.held());
    for (size_t i = 0; i < last.size(); ++i) EXPECT_EQ(last[i].seq, at - last.size() + i);
    size_t seen = 0;
    ring.ForEachLast(10, [&](const xpu_record_v1& r) {
      EXPECT_EQ(r.seq, at - std::min<size_t>(10, at) + seen);
      ++seen;
    });
    EXPECT_EQ(seen, std::min<size_t>(10, at));
    EXPECT_EQ(ring.CountLastUntil(1000, [&](const xpu_record_v1& r) { return r.seq + 5 >= at; }),
              ring.held() - std::min<size_t>(5, ring.held()));
  }
  EXPECT_EQ(at, 1000u);
  EXPECT_EQ(ring.written(), 1000u);
}

TEST(RecordRingTest, SteadyWindowsGrowAChunkAtATime) {
  constexpr size_t kChunk = RecordRing::kChunkRecords;
  RecordRing ring(65536);
  std::vector<xpu_record_v1> step;
  for (uint32_t i = 0; i < 100; ++i) step.push_back(MakeRecord(1, i, 1, i));
  for (int w = 0; w < 5; ++w) {
    for (int s = 0; s < 4; ++s) {  // a window of 4 steps, sent step by step
      ring.Append(step.data(), step.size());
      // Records that come while a window's view is read take only their
      // own room.
      EXPECT_LT(ring.allocated(), ring.held() + 2 * kChunk) << "window " << w << " step " << s;
    }
    ring.Trim(128);
    EXPECT_LT(ring.allocated(), 128 + 2 * kChunk);  // between windows: the tail only
    EXPECT_EQ(ring.Last(1).at(0).seq, 99u);
  }
}

TEST(RecordRingTest, FullChunksAreKeptCompactAndReadBackExactly) {
  constexpr size_t kChunk = RecordRing::kChunkRecords;
  // Records as a training loop writes them (a repeating order of
  // signatures, commit words counting up) and records of any bytes at all:
  // both read back bit for bit, across chunk boundaries, trims and laps.
  std::mt19937_64 rng(7);
  std::vector<xpu_record_v1> loop, noise;
  uint64_t t = 1'780'000'000'000'000'000ull;
  for (uint32_t i = 0; i < 2000; ++i) {
    t += 1000 + i % 7 * 13;
    xpu_record_v1 r = MakeRecord(1 + i % 9, t, i % 9 == 0 ? 0 : 500 + i % 11, i / 9);
    r.commit = i + 1;
    r.stream = static_cast<uint16_t>(i % 9 < 3 ? 7 : 0);
    loop.push_back(r);
    xpu_record_v1 x;
    uint64_t words[4];
    for (uint64_t& w : words) w = rng();
    std::memcpy(&x, words, sizeof(x));
    noise.push_back(x);
  }
  for (const auto* recs : {&loop, &noise}) {
    RecordRing ring(700);
    size_t at = 0;
    for (size_t n : {5u, 27u, 32u, 1u, 64u, 95u, 300u, 31u, 33u, 412u, 1000u}) {
      ring.Append(recs->data() + at, n);
      at += n;
      const auto last = ring.Last(ring.held());
      ASSERT_EQ(last.size(), std::min<size_t>(at, 700));
      EXPECT_EQ(std::memcmp(last.data(), recs->data() + at - last.size(),
                            last.size() * sizeof(xpu_record_v1)),
                0)
          << at;
      EXPECT_LT(ring.allocated(), ring.held() + 2 * kChunk);
      if (at == 457) {
        ring.Trim(40);
        const auto kept = ring.Last(100);
        ASSERT_EQ(kept.size(), 40u);
        EXPECT_EQ(std::memcmp(kept.data(), recs->data() + at - 40, 40 * sizeof(xpu_record_v1)), 0);
      }
    }
    ASSERT_EQ(at, 2000u);
    // The loop's full chunks take 7 to 16 bytes a record (the compact
    // encoding's); bytes of no pattern at most its worst case, 42.
    const size_t open = at % kChunk ? kChunk : 0;  // the chunk being filled, raw
    const double per_record = static_cast<double>(ring.bytes() - open * sizeof(xpu_record_v1)) /
                              static_cast<double>(ring.allocated() - open);
    if (recs == &loop) {
      EXPECT_LT(per_record, 16.0);
    } else {
      EXPECT_LE(per_record, 43.0);
    }
  }
}

TEST(JobStateTest, TrimKeepsTheTailAndThePaceProcessMore) {
  JobState job("j", "", 65536, 1);
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 5000; ++i) recs.push_back(MakeRecord(1, i, 1, i));
  for (int32_t rank : {3, 1, 2}) {
    xpu::v1::ProcessIdentity id;
    id.set_rank(rank);
    id.set_pid(100 + rank);
    ProcessState& p = job.GetOrCreateProcess(id, "d", 1);
    job.ApplyRecords(p, recs.data(), recs.size(), 1);
  }
  ASSERT_NE(job.PaceProcess(), nullptr);
  EXPECT_EQ(job.PaceProcess()->identity.rank(), 1);  // the lowest rank
  job.TrimRings();
  size_t bytes = 0;
  for (const auto& [key, p] : job.processes()) {
    const size_t kept = p->identity.rank() == 1 ? kPaceTailRecords : kRingTailRecords;
    EXPECT_EQ(p->ring.held(), kept) << key;
    EXPECT_GE(p->ring.allocated(), kept) << key;
    EXPECT_LT(p->ring.allocated(), kept + 2 * RecordRing::kChunkRecords) << key;
    EXPECT_EQ(p->ring.Last(1).at(0).seq, 4999u) << key;
    EXPECT_LT(p->ring.bytes(), p->ring.allocated() * sizeof(xpu_record_v1)) << key;  // compact
    bytes += p->ring.bytes();
  }
  // What the rings hold, at least a raw tail per process (what admission
  // counts a process for).
  EXPECT_EQ(job.ring_bytes(), std::max<uint64_t>(bytes, 3 * job.ring_bytes_per_process()));
}

}  // namespace
}  // namespace xpu::engine
