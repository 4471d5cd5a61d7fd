// engine/hang/hang_cuda_gdb_unittest.cc — the cuda-gdb command generator and
// parsers on synthetic output shaped like cuda-gdb's (no GPU here), and the
// ring analysis on top of them.
#include <gtest/gtest.h>

#include "engine/hang/cuda_gdb.h"

namespace xpu::engine::hang {
namespace {

constexpr char kInfoKernels[] =
    R"(  Kernel Parent Dev Grid Status   SMs Mask GridDim  BlockDim Invocation
*      0      -   0    7 Active 0x0000000f (4,1,1) (544,1,1) ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)
       1      -   0    9 Active 0x00000001 (1,1,1) (128,1,1) my_other_kernel(float*)
       2      -   0   11 Active 0x00000003 (2,1,1) (640,1,1) ncclDevKernel_AllGather_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)
)";

TEST(CudaGdbTest, ParsesNcclKernelsAndTheirProtocol) {
  std::vector<CudaKernel> k = ParseCudaKernels(kInfoKernels);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].id, 0);
  EXPECT_EQ(k[0].device, 0);
  EXPECT_EQ(k[0].grid_x, 4);
  EXPECT_EQ(k[0].proto, NcclProto::kLL);
  EXPECT_EQ(k[0].name, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  EXPECT_EQ(k[1].id, 2);
  EXPECT_EQ(k[1].grid_x, 2);
  EXPECT_EQ(k[1].proto, NcclProto::kSimple);
  EXPECT_TRUE(ParseCudaKernels("no kernels\n").empty());
}

TEST(CudaGdbTest, SmVersionPicksTheSharedWindowBase) {
  EXPECT_EQ(
      ParseSmVersion("XPU-CUDA-DEVICES\n*   0   18:00.0 NVIDIA H200   GH100-A   sm_90   132  64\n"
                     "XPU-NCCL-BEGIN kernel=0 channel=0 base=0\n"),
      90);
  EXPECT_EQ(
      ParseSmVersion("XPU-CUDA-DEVICES\n*  0  07:00.0 NVIDIA A100-SXM4-80GB GA100-A sm_80 108\n"),
      80);
  EXPECT_EQ(ParseSmVersion("info cuda devices failed\n"), 0);  // no marker
  EXPECT_EQ(ParseSmVersion("XPU-CUDA-DEVICES\nNo CUDA devices.\n"), 0);
  EXPECT_EQ(SharedBaseForSm(90), 0x400);
  EXPECT_EQ(SharedBaseForSm(100), 0x400);
  EXPECT_EQ(SharedBaseForSm(80), 0);
  EXPECT_EQ(SharedBaseForSm(0), -1);
}

TEST(CudaGdbTest, ScriptVisitsEveryChannelAtBothBasesAndDetaches) {
  std::vector<CudaKernel> k = ParseCudaKernels(kInfoKernels);
  std::string s = ProgressScript(k, 3);
  EXPECT_NE(s.find("cuda kernel 0 block (2,0,0) thread (0,0,0)"), std::string::npos);
  EXPECT_EQ(s.find("cuda kernel 0 block (3,0,0)"), std::string::npos);  // bounded by max_channels
  EXPECT_NE(s.find("cuda kernel 2 block (1,0,0) thread (0,0,0)"), std::string::npos);
  // Raw reads at NCCL 2.28's offsets from the shared window: channelId at
  // 32, channel.peers at 144, ring.prev at 152; recv[0] of the predecessor's
  // peer entry at +304, its step at 104 and tail pointer at 48.
  EXPECT_NE(s.find("echo XPU-NCCL-BEGIN kernel=0 channel=0 base=1024\\n"), std::string::npos);
  EXPECT_NE(s.find("set $xs = (@shared char*)1024"), std::string::npos);
  EXPECT_NE(s.find("set $xs = (@shared char*)0"), std::string::npos);
  EXPECT_NE(s.find("*(@shared int*)($xs+32)"), std::string::npos);
  EXPECT_NE(s.find("*(@shared int*)($xs+152)"), std::string::npos);
  EXPECT_NE(s.find("set $xp = *(@shared unsigned long long*)($xs+144)"), std::string::npos);
  EXPECT_NE(s.find("set $xr = *(unsigned long long*)($xp+8*(*(@shared int*)($xs+152)))+304"),
            std::string::npos);
  EXPECT_NE(s.find("*(unsigned long long*)($xr+104)"), std::string::npos);
  EXPECT_NE(s.find("**(unsigned long long**)($xr+48)"), std::string::npos);
  // LL flags of the 8 slots (64 KiB apart), LL128 flags (600 KiB apart).
  EXPECT_NE(s.find("*(unsigned int*)($xl+458756)"), std::string::npos);         // 7*65536+4
  EXPECT_NE(s.find("*(unsigned long long*)($xm+4300920)"), std::string::npos);  // 7*614400+120
  EXPECT_EQ(s.substr(s.size() - 12), "detach\nquit\n");
  EXPECT_NE(KernelListScript().find("info cuda kernels"), std::string::npos);
  std::vector<std::string> argv = CudaGdbCommand(42, "info cuda kernels\n\ndetach\n");
  EXPECT_EQ(argv[0], "cuda-gdb");
  EXPECT_EQ(argv[2], "42");
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv[argv.size() - 4], "-ex");
  EXPECT_EQ(argv[argv.size() - 3], "info cuda kernels");
  EXPECT_EQ(argv.back(), "detach");
}

TEST(CudaGdbTest, BlindCommandsListKernelsAndDevices) {
  std::string s = BlindProgressCommands(2, 3);
  EXPECT_EQ(s.find("set cuda break_on_launch none\necho XPU-CUDA-KERNELS\\n\ninfo cuda kernels\n"
                   "echo XPU-CUDA-DEVICES\\n\ninfo cuda devices\n"),
            0u);
  EXPECT_NE(s.find("cuda kernel 1 block (2,0,0) thread (0,0,0)"), std::string::npos);
  EXPECT_EQ(s.find("cuda kernel 2 block"), std::string::npos);
  EXPECT_NE(s.find(" ll_flags=%u,%u,%u,%u,%u,%u,%u,%u"), std::string::npos);
  EXPECT_NE(s.find(" ll128_flags=%llu,"), std::string::npos);
  EXPECT_EQ(s.find("detach"), std::string::npos);  // the caller detaches
}

TEST(CudaGdbTest, ProgressIsWhatThePredecessorDeliveredInThisKernel) {
  std::vector<ChannelProgress> p = ParseProgress(
      "XPU-NCCL-BEGIN kernel=0 channel=3 base=1024\n"
      "XPU-NCCL kernel=0 channel=3 channel_id=7 ring_prev=1 ring_next=2 ring_index=3\n"
      "XPU-NCCL kernel=0 channel=3 recv_step=4294967294 recv_tail=4294967299\n"
      "XPU-NCCL kernel=0 channel=3 send_step=10 send_head=12\n"
      "XPU-NCCL kernel=0 channel=3 "
      "ll_flags=4294967295,0,1,4294967290,4294967291,4294967292,4294967293,4294967294\n"
      "XPU-NCCL kernel=0 channel=3 ll128_flags=4294967296,4294967297,4294967298,9,9,9,9,9\n"
      "XPU-NCCL-END kernel=0 channel=3 base=1024\n");
  ASSERT_EQ(p.size(), 1u);
  const ChannelProgress& c = p[0];
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.block, 3);
  EXPECT_EQ(c.base, 1024);
  EXPECT_EQ(c.channel_id, 7);
  EXPECT_EQ(c.ring_index, 3);
  EXPECT_EQ(c.Progress(NcclProto::kSimple), 5u);  // tail - step
  // LL flags are 32-bit: flag 1 (step 0 after the wrap) is 3 past step 2^32-2.
  EXPECT_EQ(c.Progress(NcclProto::kLL), 3u);
  EXPECT_EQ(c.Progress(NcclProto::kLL128), 4u);  // 64-bit flags
  // Nothing delivered yet: every flag is from before the kernel.
  ChannelProgress idle;
  idle.recv_step = 100;
  idle.has_ll = idle.has_ll128 = idle.has_tail = true;
  for (int k = 0; k < kNcclSteps; ++k) idle.ll_flags[k] = idle.ll128_flags[k] = 93 + k;
  idle.recv_tail = 100;
  EXPECT_EQ(idle.Progress(NcclProto::kSimple), 0u);
  EXPECT_EQ(idle.Progress(NcclProto::kLL), 0u);
  EXPECT_EQ(idle.Progress(NcclProto::kLL128), 0u);
  // A block that does not exist.
  p = ParseProgress(
      "XPU-NCCL-BEGIN kernel=0 channel=1 base=0\nInvalid coordinates. Block (1,0,0) does not "
      "exist.\n"
      "XPU-NCCL-END kernel=0 channel=1 base=0\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_FALSE(p[0].ok);
  EXPECT_NE(p[0].error.find("Invalid coordinates"), std::string::npos);
}

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
