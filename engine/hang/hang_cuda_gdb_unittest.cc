// engine/hang/hang_cuda_gdb_unittest.cc — the cuda-gdb script generator and
// parsers on synthetic output shaped like cuda-gdb's (no GPU here), and the
// ring analysis on top of them.
#include <gtest/gtest.h>

#include "engine/hang/cuda_gdb.h"

namespace xpu::engine::hang {
namespace {

constexpr char kInfoKernels[] = R"(  Kernel Parent Dev Grid Status   SMs Mask GridDim  BlockDim Invocation
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

TEST(CudaGdbTest, ScriptVisitsEveryChannelAndDetaches) {
  std::vector<CudaKernel> k = ParseCudaKernels(kInfoKernels);
  std::string s = ProgressScript(k, 3);
  EXPECT_NE(s.find("cuda kernel 0 block (2,0,0) thread (0,0,0)"), std::string::npos);
  EXPECT_EQ(s.find("cuda kernel 0 block (3,0,0)"), std::string::npos);  // bounded by max_channels
  EXPECT_NE(s.find("cuda kernel 2 block (1,0,0) thread (0,0,0)"), std::string::npos);
  // Raw reads at NCCL 2.28's offsets: ring.prev at 152, recvConns[0] at
  // 552, its tail pointer at 48.
  EXPECT_NE(s.find("set $xs = (char*)&ncclShmem"), std::string::npos);
  EXPECT_NE(s.find("*(int*)($xs+152)"), std::string::npos);
  EXPECT_NE(s.find("set $xs = (@shared char*)0"), std::string::npos);
  EXPECT_NE(s.find("*(@shared int*)($xs+152)"), std::string::npos);
  EXPECT_NE(s.find("set $xr = *(@shared unsigned long long*)($xs+552)"), std::string::npos);
  EXPECT_NE(s.find("**(unsigned long long**)($xr+48)"), std::string::npos);
  EXPECT_NE(s.find("ll_flag"), std::string::npos);  // LL kernel
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

// What one rank's cuda-gdb run prints for a SIMPLE ring of 4 ranks whose
// link 1 -> 2 carries nothing: rank r's recv tail on channel 0.
std::string Output(int rank, uint64_t tail, bool broken_block) {
  std::string o = "[Switching focus to CUDA kernel 2, grid 11, block (0,0,0), thread (0,0,0), device 0]\n";
  o += "XPU-NCCL-BEGIN kernel=2 channel=0\n";
  o += "XPU-NCCL kernel=2 channel=0 ring_prev=" + std::to_string((rank + 3) % 4) +
       " ring_next=" + std::to_string((rank + 1) % 4) + "\n";
  o += "XPU-NCCL kernel=2 channel=0 recv_step=0 recv_tail=" + std::to_string(tail) + "\n";
  o += "XPU-NCCL kernel=2 channel=0 send_step=0 send_head=" + std::to_string(tail) + "\n";
  o += "XPU-NCCL-END kernel=2 channel=0\n";
  o += "XPU-NCCL-BEGIN kernel=2 channel=1\n";
  if (broken_block) o += "Invalid coordinates. Block (1,0,0) does not exist.\n";
  o += "XPU-NCCL-END kernel=2 channel=1\n";
  return o;
}

TEST(CudaGdbTest, ParsesProgressAndLocatesTheBrokenLink) {
  std::map<int32_t, std::vector<ChannelProgress>> by_rank;
  const uint64_t tails[4] = {6, 7, 0, 5};  // drop into rank 2: link 1 -> 2
  for (int r = 0; r < 4; ++r) {
    by_rank[r] = ParseProgress(Output(r, tails[r], true));
    ASSERT_EQ(by_rank[r].size(), 2u);
    EXPECT_TRUE(by_rank[r][0].ok);
    EXPECT_EQ(by_rank[r][0].recv_tail, tails[r]);
    EXPECT_FALSE(by_rank[r][1].ok);
    EXPECT_NE(by_rank[r][1].error.find("Invalid coordinates"), std::string::npos);
  }
  std::map<int32_t, std::vector<KernelProgress>> per_rank;
  std::vector<KernelProgress> ring = RingProgressFromCudaGdb(by_rank, NcclProto::kSimple, &per_rank);
  ASSERT_EQ(ring.size(), 4u);
  std::vector<uint64_t> steps;
  for (const KernelProgress& k : ring) steps.push_back(k.step);
  int pos = FindStalledLink(steps);
  ASSERT_GE(pos, 0);
  // Ring order from rank 0 following ring_next: 0,1,2,3 -> position 2 = rank 2.
  EXPECT_EQ(pos, 2);
  // Through the classifier: all ranks in the collective -> communication,
  // culprits the two ends of the link.
  std::vector<RankEvidence> ranks;
  for (int r = 0; r < 4; ++r) {
    RankEvidence e;
    e.rank = r;
    e.host = "h";
    e.proc_state = "sleeping";
    e.has_progress = true;
    CommState c;
    c.comm_id = 1;
    c.last_issued = 5;
    c.last_completed = 4;
    c.pending_seq = 5;
    c.pending_kind = 16;
    c.pending_bytes = 64;
    e.comms.push_back(c);
    e.kernel = per_rank[r];
    ranks.push_back(e);
  }
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kCommunication);
  EXPECT_EQ(v.faulty_link, "1->2");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1, 2}));
}

TEST(CudaGdbTest, BlindCommandsListKernelsAndReadEveryProtocolsFlag) {
  std::string s = BlindProgressCommands(2, 3);
  EXPECT_EQ(s.find("set cuda break_on_launch none\necho XPU-CUDA-KERNELS\\n\ninfo cuda kernels\n"), 0u);
  EXPECT_NE(s.find("cuda kernel 1 block (2,0,0) thread (0,0,0)"), std::string::npos);
  EXPECT_EQ(s.find("cuda kernel 2 block"), std::string::npos);
  EXPECT_NE(s.find(" ll_flag=%u"), std::string::npos);
  EXPECT_NE(s.find(" ll128_flag=%llu"), std::string::npos);
  EXPECT_EQ(s.find("detach"), std::string::npos);  // the caller detaches
  // LL128 progress comes from its own flag when the blind reads gave both.
  std::vector<ChannelProgress> p = ParseProgress(
      "XPU-NCCL-BEGIN kernel=0 channel=0\nXPU-NCCL kernel=0 channel=0 ring_prev=1 ring_next=1\n"
      "XPU-NCCL kernel=0 channel=0 ll_flag=3\nXPU-NCCL kernel=0 channel=0 ll128_flag=8\n"
      "XPU-NCCL-END kernel=0 channel=0\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].Progress(NcclProto::kLL), 3u);
  EXPECT_EQ(p[0].Progress(NcclProto::kLL128), 8u);
}

TEST(CudaGdbTest, LlProtocolsUseTheFlag) {
  ChannelProgress c;
  c.recv_tail = 3;
  c.ll_flag = 9;
  EXPECT_EQ(c.Progress(NcclProto::kSimple), 3u);
  EXPECT_EQ(c.Progress(NcclProto::kLL), 9u);
  EXPECT_EQ(c.Progress(NcclProto::kLL128), 9u);
  std::vector<ChannelProgress> p = ParseProgress(
      "XPU-NCCL-BEGIN kernel=0 channel=0\nXPU-NCCL kernel=0 channel=0 ring_prev=1 ring_next=1\n"
      "XPU-NCCL kernel=0 channel=0 ll_flag=17\nXPU-NCCL-END kernel=0 channel=0\n");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].ll_flag, 17u);
}

}  // namespace
}  // namespace xpu::engine::hang
