#include "common/analysis/gemm.h"

#include <gtest/gtest.h>

#include "common/analysis/test_util.h"

namespace xpu::analysis {
namespace {

using testing::Coll;
using testing::Gemm;
using testing::MakeOp;

TEST(GemmTest, TflopsExcludesOverlapAndUntimed) {
  RankTrace t;
  t.rank = 0;
  t.sigs[1] = Gemm(1024, 1024, 1024);  // 2^31 flops = 2.147483648e9
  t.sigs[2] = Coll(XPU_OP_ALLREDUCE, 1 << 20, 7, 0, 8);
  // Two clean GEMMs of 100 us and 300 us.
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 1000000, 100000));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 2000000, 300000));
  // One overlapping the collective [3.05 ms, 3.5 ms].
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 3000000, 100000));
  t.ops.push_back(MakeOp(2, XPU_OP_ALLREDUCE, 3050000, 450000, 1, XPU_REC_TIMED, 2));
  // One not timed.
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 4000000, 1, 0, XPU_REC_NOT_TIMED));
  // One that ends exactly where the collective starts does not overlap.
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 2950000, 100000));
  t.Sort();
  auto g = GemmTflops(t);
  ASSERT_EQ(g.size(), 1u);
  const GemmStat& s = g.begin()->second;
  EXPECT_EQ(s.key, "cublasGemmEx 1024x1024x1024x1 dt3");
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.excluded_overlap, 1u);
  EXPECT_EQ(s.excluded_untimed, 1u);
  EXPECT_EQ(s.total_ns, 500000u);
  // 3 * 2^31 flops / 500 us = 12.884901888 TFLOPS.
  EXPECT_NEAR(s.Tflops(), 3 * 2147483648.0 / 500e-6 / 1e12, 1e-9);
}

TEST(GemmTest, UntimedCollectiveCountsOnlyWithoutATimedRecord) {
  // With the NCCL profiler plugin a collective has the interposer's untimed
  // record (launch to the poll that saw it done: an upper bound that can
  // cover the next forward pass) and the plugin's timed one, same seq.
  RankTrace t;
  t.sigs[1] = Gemm(1024, 1024, 1024);
  t.sigs[2] = Coll(XPU_OP_ALLREDUCE, 1 << 20, 7, 0, 8);
  t.ops.push_back(MakeOp(2, XPU_OP_ALLREDUCE, 1000000, 5000000, 1, XPU_REC_NOT_TIMED, 2));
  t.ops.push_back(
      MakeOp(2, XPU_OP_ALLREDUCE, 1200000, 300000, 1, XPU_REC_PLUGIN | XPU_REC_TIMED, 2));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 1300000, 100000));  // under the plugin's kernel
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 3000000, 100000));  // only under the upper bound
  // A collective with no timed record keeps its upper bound.
  t.ops.push_back(MakeOp(2, XPU_OP_ALLREDUCE, 8000000, 2000000, 2, XPU_REC_NOT_TIMED, 2));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 9000000, 100000));
  t.Sort();
  const auto stats = GemmTflops(t);
  const GemmStat& s = stats.begin()->second;
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.excluded_overlap, 2u);
}

TEST(GemmTest, OneRankCommunicatorExcludesNothing) {
  // A one-GPU job's DDP all-reduces: a one-rank communicator, no profiler
  // event, the untimed record spanning launch to the poll that saw it done
  // (here the whole step). Every GEMM under it counts; a two-rank
  // communicator's untimed record and a timed one-rank record still exclude.
  RankTrace t;
  t.sigs[1] = Gemm(1024, 1024, 1024);
  t.sigs[2] = Coll(XPU_OP_ALLREDUCE, 1 << 20, 7, 0, 1);
  t.sigs[3] = Coll(XPU_OP_ALLREDUCE, 1 << 20, 8, 0, 2);
  t.ops.push_back(MakeOp(2, XPU_OP_ALLREDUCE, 1000000, 5000000, 1, XPU_REC_NOT_TIMED, 2));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 2000000, 100000));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 3000000, 100000));
  t.ops.push_back(MakeOp(3, XPU_OP_ALLREDUCE, 8000000, 2000000, 1, XPU_REC_NOT_TIMED, 2));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 9000000, 100000));
  t.ops.push_back(MakeOp(2, XPU_OP_ALLREDUCE, 12000000, 500000, 3, XPU_REC_TIMED, 2));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 12100000, 100000));
  t.Sort();
  const GemmStat& s = GemmTflops(t).begin()->second;
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.excluded_overlap, 2u);
}

TEST(GemmTest, TimeRangeFilter) {
  RankTrace t;
  t.sigs[1] = Gemm(64, 64, 64);
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 100, 10));
  t.ops.push_back(MakeOp(1, XPU_OP_GEMM, 200, 10));
  auto g = GemmTflops(t, 150, 300);
  EXPECT_EQ(g.begin()->second.count, 1u);
}

TEST(GemmTest, AlignmentExplainsOddDimensions) {
  EXPECT_EQ(AlignmentElements(XPU_DT_BF16), 64u);
  EXPECT_EQ(AlignmentElements(XPU_DT_F8_E4M3), 128u);
  EXPECT_EQ(AlignmentElements(XPU_DT_F32), 32u);
  auto issues = AlignmentIssues(Gemm(4096, 2048, 8484));
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0],
            "k=8484 is not a multiple of 64 elements (bf16); padding to 8512 would align it");
  EXPECT_TRUE(AlignmentIssues(Gemm(4096, 2048, 8512)).empty());
  EXPECT_EQ(AlignmentIssues(Gemm(100, 2048, 8512, XPU_DT_F8_E4M3)).size(), 2u);  // m and n vs 128
}

}  // namespace
}  // namespace xpu::analysis
