#include "common/analysis/collective.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include "common/analysis/test_util.h"

namespace xpu::analysis {
namespace {

using testing::Coll;
using testing::MakeOp;

TEST(CollectiveTest, LastArrivalBusBandwidth) {
  // 4 ranks, allreduce of 1 MB (1e6 bytes); members start at 0, 10, 30, 20 us
  // and all end at 130 us: time = 130 - 30 = 100 us; algbw = 1e10 B/s;
  // factor 2*3/4 = 1.5 -> busbw 1.5e10.
  std::vector<RankTrace> ranks(4);
  const uint64_t starts[] = {0, 10000, 30000, 20000};
  for (int r = 0; r < 4; ++r) {
    ranks[r].rank = r;
    ranks[r].host = r < 2 ? "a" : "b";
    ranks[r].sigs[5] = Coll(XPU_OP_ALLREDUCE, 1000000, 42, r, 4);
    ranks[r].ops.push_back(MakeOp(5, XPU_OP_ALLREDUCE, 1000000 + starts[r], 130000 - starts[r], 1));
  }
  auto inst = GroupCollectives(ranks);
  ASSERT_EQ(inst.size(), 1u);
  LastArrival la = MeasureLastArrival(inst[0]);
  ASSERT_TRUE(la.valid);
  EXPECT_EQ(la.last_rank, 2);
  EXPECT_DOUBLE_EQ(la.seconds, 100e-6);
  EXPECT_NEAR(la.algbw, 1e10, 1);
  EXPECT_NEAR(la.busbw, 1.5e10, 1);

  auto cb = CommunicatorBandwidth(ranks);
  ASSERT_EQ(cb.size(), 1u);
  EXPECT_EQ(cb[0].ranks.size(), 4u);
  EXPECT_EQ(cb[0].hosts.size(), 2u);
  EXPECT_NEAR(cb[0].BusBw(), 1.5e10, 1);
}

TEST(CollectiveTest, IncompleteOrUntimedInstancesAreNotMeasured) {
  std::vector<RankTrace> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].sigs[5] = Coll(XPU_OP_ALLREDUCE, 1000, 42, r, 2);
  }
  ranks[0].ops.push_back(MakeOp(5, XPU_OP_ALLREDUCE, 100, 50, 1));
  auto inst = GroupCollectives(ranks);
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_FALSE(MeasureLastArrival(inst[0]).valid);  // member 1 missing
  ranks[1].ops.push_back(MakeOp(5, XPU_OP_ALLREDUCE, 100, 50, 1, XPU_REC_NOT_TIMED));
  inst = GroupCollectives(ranks);
  EXPECT_FALSE(MeasureLastArrival(inst[0]).valid);  // member 1 not timed
}

TEST(CollectiveTest, FoldingMembersOneAtATimeGivesTheSameMeasurement) {
  // The members of LastArrivalBusBandwidth, in arrival order.
  LastArrivalFold fold;
  const uint64_t starts[] = {0, 10000, 30000, 20000};
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(fold.Add(r, 1000000 + starts[r], 1130000, true));
  }
  LastArrival la = fold.Result(1000000, xpu_busbw_factor(XPU_OP_ALLREDUCE, 4));
  ASSERT_TRUE(la.valid);
  EXPECT_EQ(la.last_rank, 2);
  EXPECT_DOUBLE_EQ(la.seconds, 100e-6);
  EXPECT_NEAR(la.busbw, 1.5e10, 1);
  // One untimed member makes the instance unmeasurable, whatever follows.
  LastArrivalFold untimed;
  EXPECT_TRUE(untimed.Add(0, 100, 200, true));
  EXPECT_FALSE(untimed.Add(1, 100, 200, false));
  EXPECT_FALSE(untimed.Add(2, 100, 200, true));
  EXPECT_FALSE(untimed.Result(1000, 1.0).valid);
  // No member, or an end before the last start: not measured.
  EXPECT_FALSE(LastArrivalFold().Result(1000, 1.0).valid);
  LastArrivalFold inverted;
  inverted.Add(0, 500, 400, true);
  EXPECT_FALSE(inverted.Result(1000, 1.0).valid);
}

TEST(CollectiveTest, P2pLinksPairSendWithRecv) {
  // Ring of 3: r sends 1e6 bytes to r+1. Link 1->2 takes 200 us, others 100.
  std::vector<RankTrace> ranks(3);
  for (int r = 0; r < 3; ++r) {
    ranks[r].rank = r;
    ranks[r].host = r == 2 ? "b" : "a";
    ranks[r].sigs[1] = Coll(XPU_OP_SEND, 1000000, 9, r, 3, (r + 1) % 3);
    ranks[r].sigs[2] = Coll(XPU_OP_RECV, 1000000, 9, r, 3, (r + 2) % 3);
  }
  auto dur = [](int src) { return src == 1 ? 200000u : 100000u; };
  for (int src = 0; src < 3; ++src) {
    int dst = (src + 1) % 3;
    // The receiver posts 20 us later; the transfer ends dur after that.
    ranks[src].ops.push_back(MakeOp(1, XPU_OP_SEND, 1000000, 20000 + dur(src), 1));
    ranks[dst].ops.push_back(MakeOp(2, XPU_OP_RECV, 1020000, dur(src), 2));
  }
  for (auto& t : ranks) t.Sort();
  auto links = P2pLinks(ranks);
  ASSERT_EQ(links.size(), 3u);
  for (const LinkBandwidth& l : links) {
    EXPECT_EQ(l.dst, (l.src + 1) % 3);
    EXPECT_EQ(l.count, 1u);
    EXPECT_NEAR(l.Bw(), 1e6 / (dur(l.src) * 1e-9), 1) << l.src;
    EXPECT_EQ(l.inter_node(), l.src == 1 || l.src == 2);
  }
}

}  // namespace
}  // namespace xpu::analysis

namespace xpu::analysis {
namespace {

using testing::Coll;
using testing::MakeOp;

TEST(CollectiveTest, PluginTimingRecordJoinsTheOccurrence) {
  // With the NCCL profiler plugin each rank has the interposer's untimed
  // record and the plugin's timed one for the same (comm, seq).
  std::vector<RankTrace> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ranks[r].sigs[5] = Coll(XPU_OP_ALLREDUCE, 1000000, 42, r, 2);
    ranks[r].ops.push_back(MakeOp(5, XPU_OP_ALLREDUCE, 1000, 900000, 1, XPU_REC_NOT_TIMED));
    ranks[r].ops.push_back(
        MakeOp(5, XPU_OP_ALLREDUCE, 2000 + 1000 * r, 100000, 1, XPU_REC_PLUGIN | XPU_REC_TIMED));
  }
  auto inst = GroupCollectives(ranks);
  ASSERT_EQ(inst.size(), 1u);
  EXPECT_EQ(inst[0].members.size(), 2u);
  LastArrival la = MeasureLastArrival(inst[0]);
  ASSERT_TRUE(la.valid);
  EXPECT_EQ(la.last_rank, 1);
  EXPECT_DOUBLE_EQ(la.seconds, 100e-6);  // last start 3000, last end 103000
}

// CommunicatorBandwidth folds each instance as its members' ranks are read;
// its figures are those of grouping every instance with its members first
// (GroupCollectives, MeasureLastArrival), summed in instance order.
std::vector<CommBandwidth> GroupedReference(const std::vector<RankTrace>& ranks, uint64_t from_ns,
                                            uint64_t to_ns) {
  std::map<int32_t, std::string> host_of;
  for (const RankTrace& t : ranks) host_of[t.rank] = t.host;
  std::map<std::tuple<uint64_t, uint16_t, uint64_t>, CommBandwidth> by;
  for (const CollInstance& c : GroupCollectives(ranks, from_ns, to_ns)) {
    const LastArrival la = MeasureLastArrival(c);
    if (!la.valid) continue;
    CommBandwidth& b = by[{c.comm_id, c.kind, c.bytes}];
    b.comm_id = c.comm_id;
    b.kind = c.kind;
    b.nranks = c.nranks;
    b.bytes = c.bytes;
    for (const CollMember& m : c.members) {
      b.ranks.insert(m.rank);
      b.hosts.insert(host_of[m.rank]);
    }
    ++b.count;
    b.bus_bytes += static_cast<double>(c.bytes) * c.factor;
    b.seconds += la.seconds;
  }
  std::vector<CommBandwidth> out;
  for (auto& [k, b] : by) out.push_back(std::move(b));
  return out;
}

TEST(CollectiveTest, FoldedAsRanksAreReadTheFiguresOfTheGroupedInstances) {
  // 64 ranks on 8 hosts: tensor-parallel groups of 4 (consecutive ranks),
  // data-parallel groups of 16 (a stride of 4 apart), the world; each
  // collective as the interposer's untimed record and, mostly, the
  // plugin's timed one; now and then a member missing, only untimed, or
  // present twice; two sizes on one communicator.
  std::mt19937_64 rng(7);
  std::vector<RankTrace> ranks(64);
  for (int32_t r = 0; r < 64; ++r) {
    RankTrace& t = ranks[static_cast<size_t>(r)];
    t.rank = r;
    t.host = "h" + std::to_string(r / 8);
    t.sigs[1] = Coll(XPU_OP_ALLREDUCE, 1 << 20, 100 + r / 4, r % 4, 4);
    t.sigs[2] = Coll(XPU_OP_ALLREDUCE, 8 << 20, 200 + r % 4, r / 4, 16);
    t.sigs[3] = Coll(XPU_OP_ALLGATHER, 4 << 20, 300, r, 64);
    t.sigs[4] = Coll(XPU_OP_ALLREDUCE, 2 << 20, 100 + r / 4, r % 4, 4);
    for (uint32_t seq = 1; seq <= 40; ++seq) {
      for (uint32_t sig : {1u, 2u, 3u, 4u}) {
        if (sig == 4 && seq % 3 != 0) continue;
        const uint64_t s = seq * 1000000ull + sig * 100000 + rng() % 50000;
        const uint64_t d = 20000 + rng() % 30000;
        const uint16_t kind = t.sigs[sig].kind;
        const int dice = static_cast<int>(rng() % 40);
        if (dice == 0) continue;  // missing
        t.ops.push_back(MakeOp(sig, kind, s - 5000, d + 5000, seq, XPU_REC_NOT_TIMED));
        if (dice == 1) continue;  // untimed only
        t.ops.push_back(MakeOp(sig, kind, s, d, seq));
        if (dice == 2) t.ops.push_back(MakeOp(sig, kind, s + 7, d, seq));  // twice
      }
    }
    t.Sort();
  }
  for (auto [from, to] : {std::pair<uint64_t, uint64_t>{0, UINT64_MAX},
                          std::pair<uint64_t, uint64_t>{10000000, 30000000}}) {
    const std::vector<CommBandwidth> want = GroupedReference(ranks, from, to);
    const std::vector<CommBandwidth> got = CommunicatorBandwidth(ranks, from, to);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_GT(want.size(), 20u);
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(got[i].comm_id, want[i].comm_id);
      EXPECT_EQ(got[i].kind, want[i].kind);
      EXPECT_EQ(got[i].nranks, want[i].nranks);
      EXPECT_EQ(got[i].bytes, want[i].bytes);
      EXPECT_EQ(got[i].count, want[i].count);
      EXPECT_EQ(got[i].bus_bytes, want[i].bus_bytes);
      EXPECT_EQ(got[i].seconds, want[i].seconds);  // bit for bit
      EXPECT_EQ(got[i].ranks, want[i].ranks);
      EXPECT_EQ(got[i].hosts, want[i].hosts);
    }
  }
  // A rank given twice (two traces of one rank): the grouped path, the same
  // figures.
  std::vector<RankTrace> twice = ranks;
  twice.push_back(ranks[5]);
  const std::vector<CommBandwidth> want = GroupedReference(twice, 0, UINT64_MAX);
  const std::vector<CommBandwidth> got = CommunicatorBandwidth(twice);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].count, want[i].count);
    EXPECT_EQ(got[i].seconds, want[i].seconds);
    EXPECT_EQ(got[i].ranks, want[i].ranks);
  }
}

}  // namespace
}  // namespace xpu::analysis
