// engine/hang/hang_cuda_gdb_unittest.cc — intra-kernel progress from
// cuda-gdb ring readings (cuda_gdb_rings.h) and the verdicts it leads to,
// on counters recorded on real GPUs and on synthetic rings.
#include <gtest/gtest.h>

#include "common/cuda_gdb/cuda_gdb.h"
#include "engine/hang/classify.h"
#include "engine/hang/cuda_gdb_rings.h"

namespace xpu::engine::hang {
namespace {

using cuda_gdb::ChannelProgress;
using cuda_gdb::NcclProto;

// Counters as cuda-gdb read them on 4 H200s (NCCL 2.28.9, PyTorch's DDP
// all-reduce in ncclDevKernel_AllReduce_Sum_bf16_RING_LL, rank 1 stopped
// with SIGSTOP, channel 0, ring 0->1->2->3->0), per read rank:
// {recv step, recv tail, send step, send head, LL flags}.
struct Recorded {
  int rank, prev, next;
  uint64_t recv_step, tail, send_step, head;
  std::vector<uint32_t> ll;
};

std::map<int32_t, std::vector<RingReading>> FromRecorded(const std::vector<Recorded>& rec,
                                                         NcclProto* moved) {
  std::map<int32_t, std::vector<RingReading>> out;
  for (const Recorded& r : rec) {
    ChannelProgress c;
    c.recv_step = r.recv_step;
    c.recv_tail = r.tail;
    c.has_tail = true;
    c.send_step = r.send_step;
    c.send_head = r.head;
    c.has_ll = c.has_ll128 = true;
    for (size_t k = 0; k < r.ll.size(); ++k) c.ll_flags[k] = r.ll[k];
    NcclProto p = NcclProto::kUnknown;
    out[r.rank].push_back({0, r.prev, r.next, c.Delivered(&p), c.Consumed()});
    if (p != NcclProto::kUnknown) *moved = p;
  }
  return out;
}

Verdict ClassifyStopped(const std::map<int32_t, std::vector<RingReading>>& by_rank, int stopped);

TEST(CudaGdbTest, RecordedH200ReadingsNameTheStoppedRankForEveryProtocol) {
  const std::vector<uint32_t> zeros(8, 0);
  NcclProto moved = NcclProto::kUnknown;
  // NCCL_PROTO=Simple: the tail moved (0 got 8 steps, 3 got 4, 2 none).
  auto simple = FromRecorded({{0, 3, 1, 40716, 40724, 40812, 40812, zeros},
                              {2, 1, 3, 40812, 40812, 40812, 40816, zeros},
                              {3, 2, 0, 40812, 40816, 40716, 40720, zeros}},
                             &moved);
  EXPECT_EQ(moved, NcclProto::kSimple);
  Verdict v = ClassifyStopped(simple, 1);
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1}));
  EXPECT_EQ(v.faulty_link, "1->2");
  // NCCL_PROTO=LL: the slot flags moved (0 got 2, 3 got 1, 2 none).
  moved = NcclProto::kUnknown;
  auto ll = FromRecorded({{0,
                           3,
                           1,
                           121749,
                           0,
                           123117,
                           123117,
                           {121745, 121746, 121747, 121748, 121749, 121750, 121751, 121744}},
                          {2,
                           1,
                           3,
                           123117,
                           0,
                           123117,
                           123118,
                           {123113, 123114, 123115, 123116, 123117, 123110, 123111, 123112}},
                          {3,
                           2,
                           0,
                           123117,
                           0,
                           121749,
                           121751,
                           {123113, 123114, 123115, 123116, 123117, 123118, 123111, 123112}}},
                         &moved);
  EXPECT_EQ(moved, NcclProto::kLL);
  EXPECT_EQ(ll[0][0].steps, 2u);
  v = ClassifyStopped(ll, 1);
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1}));
  // NCCL_PROTO=LL128: nothing readable moved on the receive side, but the
  // credits did: 0's successor (the stopped 1) consumed nothing.
  moved = NcclProto::kUnknown;
  auto ll128 = FromRecorded({{0, 3, 1, 12183, 0, 12266, 12266, zeros},
                             {2, 1, 3, 12266, 0, 12266, 12267, zeros},
                             {3, 2, 0, 12266, 0, 12183, 12185, zeros}},
                            &moved);
  EXPECT_EQ(moved, NcclProto::kUnknown);
  v = ClassifyStopped(ll128, 1);
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1}));
  EXPECT_EQ(v.faulty_link, "0->1");
}

RankEvidence InCollective(int rank, uint32_t issued, bool pending) {
  RankEvidence e;
  e.rank = rank;
  e.host = "h";
  e.proc_state = "sleeping";
  e.has_progress = true;
  CommState c;
  c.comm_id = 1;
  c.comm_rank = rank;
  c.comm_nranks = 4;
  c.last_issued = issued;
  c.last_completed = pending ? issued - 1 : issued;
  c.pending_seq = pending ? issued : 0;
  c.pending_kind = 16;
  c.pending_bytes = 64;
  e.comms.push_back(c);
  return e;
}

// A SIMPLE ring 0->1->2->3->0 whose link 1 -> 2 carries nothing: every rank
// in the kernel, rank r received steps[r] on channel 0.
TEST(CudaGdbTest, WholeRingLocatesTheBrokenLink) {
  std::map<int32_t, std::vector<RingReading>> by_rank;
  const uint64_t steps[4] = {6, 7, 0, 5};
  for (int r = 0; r < 4; ++r) by_rank[r].push_back({0, (r + 3) % 4, (r + 1) % 4, steps[r]});
  std::map<int32_t, std::vector<KernelProgress>> per_rank;
  std::vector<KernelProgress> ring = RingProgressFromCudaGdb(by_rank, "cuda-gdb SIMPLE", &per_rank);
  ASSERT_EQ(ring.size(), 4u);
  EXPECT_EQ(per_rank[2][0].ring_pos, 2);
  EXPECT_EQ(per_rank[2][0].ring_size, 4);
  EXPECT_EQ(per_rank[2][0].prev_rank, 1);
  std::vector<RankEvidence> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(InCollective(r, 5, true));
    ranks.back().kernel = per_rank[r];
  }
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kCommunication);
  EXPECT_EQ(v.faulty_link, "1->2");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1, 2}));
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1, 2}));
}

// Rank 1 stopped before the collective: ranks 0, 2, 3 are in the kernel
// (ring orders differ per channel, as NCCL builds them); rank 1 is not read.
// The ring progress of the others must name rank 1 on its own.
TEST(CudaGdbTest, PartialRingNamesTheMemberThatWasNotRead) {
  std::map<int32_t, std::vector<RingReading>> by_rank;
  // Channel 0: 0->1->2->3->0. Rank 2 (after 1) received nothing.
  by_rank[0].push_back({0, 3, 1, 4});
  by_rank[2].push_back({0, 1, 3, 0});
  by_rank[3].push_back({0, 2, 0, 4});
  // Channel 1: 0->2->1->3->0. Rank 3 (after 1) received nothing.
  by_rank[0].push_back({1, 3, 2, 4});
  by_rank[2].push_back({1, 0, 1, 4});
  by_rank[3].push_back({1, 1, 0, 0});
  std::map<int32_t, std::vector<KernelProgress>> per_rank;
  RingProgressFromCudaGdb(by_rank, "cuda-gdb LL", &per_rank);
  ASSERT_EQ(per_rank[3].size(), 2u);
  EXPECT_EQ(per_rank[3][1].prev_rank, 1);
  EXPECT_EQ(per_rank[3][1].ring_size, 4);  // the order closes through rank 1
  std::vector<RankEvidence> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(InCollective(r, r == 1 ? 4 : 5, r != 1));
    ranks.back().kernel = per_rank[r];
  }
  ranks[1].proc_state = "stopped";
  const RingFinding f = LocateOnRings(ranks);
  EXPECT_EQ(f.channels, 2);
  EXPECT_EQ(f.agree, 2);
  EXPECT_FALSE(f.from_read);
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "operations");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1}));
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1}));
  EXPECT_EQ(v.faulty_link, "1->2");
  EXPECT_NE(v.reason.find("ring progress stops at rank 1 too"), std::string::npos) << v.reason;
  // The same with rank 1 running but never issuing the collective (stuck in
  // Python): the missing-rank rule, corroborated by the ring.
  ranks[1].proc_state = "sleeping";
  v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_EQ(v.ring_named, std::vector<int32_t>({1}));
  // Uniform progress names nothing.
  for (RankEvidence& r : ranks) {
    for (KernelProgress& k : r.kernel) k.step = 4;
  }
  EXPECT_TRUE(LocateOnRings(ranks).link.empty());
}

TEST(CudaGdbTest, ChainsThatDoNotCloseStillGivePredecessors) {
  // Ranks 1 and 2 both unread in a ring of 5: the order cannot close, but
  // rank 3's predecessor is known to be rank 2.
  std::map<int32_t, std::vector<RingReading>> by_rank;
  by_rank[0].push_back({0, 4, 1, 3});
  by_rank[3].push_back({0, 2, 4, 0});
  by_rank[4].push_back({0, 3, 0, 2});
  std::map<int32_t, std::vector<KernelProgress>> per_rank;
  RingProgressFromCudaGdb(by_rank, "cuda-gdb SIMPLE", &per_rank);
  EXPECT_EQ(per_rank[3][0].ring_pos, -1);
  EXPECT_EQ(per_rank[3][0].prev_rank, 2);
  std::vector<RankEvidence> ranks;
  for (int r : {0, 3, 4}) {
    ranks.push_back(InCollective(r, 5, true));
    ranks.back().kernel = per_rank[r];
  }
  const RingFinding f = LocateOnRings(ranks);
  EXPECT_EQ(f.link, "2->3");
}

Verdict ClassifyStopped(const std::map<int32_t, std::vector<RingReading>>& by_rank, int stopped) {
  std::map<int32_t, std::vector<KernelProgress>> per_rank;
  RingProgressFromCudaGdb(by_rank, "cuda-gdb", &per_rank);
  std::vector<RankEvidence> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(InCollective(r, r == stopped ? 4 : 5, r != stopped));
    ranks.back().kernel = per_rank[r];
  }
  ranks[static_cast<size_t>(stopped)].proc_state = "stopped";
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({stopped}));
  return v;
}

}  // namespace
}  // namespace xpu::engine::hang
