// common/analysis/trace_unittest.cc — the record ABI -> analysis conversion.
#include "common/analysis/trace.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "xpu/formulas.h"

namespace xpu::analysis {
namespace {

TEST(TraceTest, OpSigFromAbiCarriesTheFieldsAndTheFormulas) {
  xpu_signature_v1 g{};
  g.kind = XPU_OP_GEMM;
  g.dtype = XPU_DT_BF16;
  g.gemm_flags = XPU_GEMM_TRANSB;
  g.m = 128;
  g.n = 256;
  g.k = 64;
  g.batch = 0;  // counts as 1
  OpSig o = OpSigFromAbi(g, "cublasGemmEx");
  EXPECT_EQ(o.kind, XPU_OP_GEMM);
  EXPECT_EQ(o.gemm_flags, XPU_GEMM_TRANSB);
  EXPECT_EQ(o.batch, 1u);
  EXPECT_EQ(o.name, "cublasGemmEx");
  EXPECT_DOUBLE_EQ(o.flops, xpu_sig_flops(&g));
  EXPECT_GT(o.flops, 0);

  xpu_signature_v1 c{};
  c.kind = XPU_OP_ALLREDUCE;
  c.dtype = XPU_DT_F32;
  c.count = 1000;
  c.comm_id = 7;
  c.comm_rank = 2;
  c.comm_nranks = 4;
  c.peer = -1;
  o = OpSigFromAbi(c, "ncclAllReduce");
  EXPECT_TRUE(o.collective());
  EXPECT_EQ(o.bytes, xpu_sig_bytes(&c));
  EXPECT_DOUBLE_EQ(o.busbw_factor, xpu_busbw_factor(XPU_OP_ALLREDUCE, 4));
  EXPECT_EQ(o.comm_id, 7u);
  EXPECT_EQ(o.comm_rank, 2);
  EXPECT_EQ(o.comm_nranks, 4);
  EXPECT_EQ(o.peer, -1);
}

TEST(TraceTest, OpFromRecordHonoursMicrosecondDurationsAndTheOffset) {
  xpu_record_v1 r{};
  r.sig_id = 3;
  r.flags = XPU_REC_TIMED | XPU_REC_DUR_US | XPU_REC_ISSUE_LAT_VALID;
  r.stream = 2;
  r.seq = 9;
  r.start_ns = 1000000;
  r.duration = 5;  // microseconds
  r.issue_latency_ns = 700;
  Op op = OpFromRecord(r, XPU_OP_KERNEL, 400);
  EXPECT_EQ(op.sig_id, 3u);
  EXPECT_EQ(op.kind, XPU_OP_KERNEL);
  EXPECT_EQ(op.start_ns, 999600u);
  EXPECT_EQ(op.dur_ns, 5000u);
  EXPECT_EQ(op.seq, 9u);
  EXPECT_EQ(op.stream, 2);
  EXPECT_TRUE(op.timed());
  EXPECT_EQ(op.launch_ns(), 999600u - 700u);
  EXPECT_EQ(OpFromRecord(r, XPU_OP_KERNEL).start_ns, 1000000u);
}

// A SigTable holds its own entries and entries shared with other tables;
// writing to a shared one copies it first, so tables stay values.
TEST(TraceTest, SigTableSharesEntriesAndCopiesThemBeforeAWrite) {
  SigTable a;
  a[7].name = "own";
  a[3].kind = XPU_OP_GEMM;
  auto shared = std::make_shared<const OpSig>(OpSig{XPU_OP_ALLREDUCE});
  a.Share(5, shared);
  SigTable b;
  b.Share(5, shared);
  EXPECT_EQ(a.Find(5), shared.get());
  EXPECT_EQ(b.Find(5), a.Find(5));  // one copy for both
  EXPECT_EQ(a.Find(4), nullptr);
  EXPECT_EQ(a.count(3), 1u);
  EXPECT_EQ(a.count(4), 0u);
  std::vector<uint32_t> ids;
  for (const auto& [id, s] : a) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<uint32_t>{3, 5, 7}));  // in sig_id order
  EXPECT_EQ(a.at(7).name, "own");
  EXPECT_THROW(a.at(4), std::out_of_range);

  b[5].comm_rank = 9;  // b's own copy now; a and the shared entry unchanged
  EXPECT_NE(b.Find(5), shared.get());
  EXPECT_EQ(b.Find(5)->kind, XPU_OP_ALLREDUCE);
  EXPECT_EQ(b.Find(5)->comm_rank, 9);
  EXPECT_EQ(a.Find(5)->comm_rank, -1);
  EXPECT_EQ(shared->comm_rank, -1);

  SigTable c = a;  // a copy shares a's entries until one of them writes
  c[7].name = "c's";
  EXPECT_EQ(a.at(7).name, "own");
  EXPECT_EQ(c.at(7).name, "c's");
  EXPECT_EQ(c.Find(3), a.Find(3));

  c = std::map<uint32_t, OpSig>{{1, OpSig{XPU_OP_KERNEL}}};  // from a map
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.at(1).kind, XPU_OP_KERNEL);
}

}  // namespace
}  // namespace xpu::analysis
