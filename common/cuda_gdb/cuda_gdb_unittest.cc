// common/cuda_gdb/cuda_gdb_unittest.cc — the cuda-gdb command generator and
// parsers on synthetic output shaped like cuda-gdb's (no GPU here). The ring
// analysis on top of them: engine/hang/hang_cuda_gdb_unittest.cc.
#include <gtest/gtest.h>

#include "common/cuda_gdb/cuda_gdb.h"

namespace xpu::cuda_gdb {
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

}  // namespace
}  // namespace xpu::cuda_gdb
