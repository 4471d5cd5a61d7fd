#include "engine/state/batch_decoder.h"

#include <gtest/gtest.h>

#include "engine/state/batch_builder.h"
#include "xpu/formulas.h"

namespace xpu::engine {
namespace {

xpu::v1::ProcessBatch ValidBatch() {
  xpu::v1::ProcessBatch pb;
  SetIdentity(&pb, "job", 0, "h0", 100);
  *pb.add_signatures() = MakeGemmSignature(1, 4096, 4096, 4096);
  *pb.add_signatures() =
      MakeCollectiveSignature(2, XPU_OP_ALLREDUCE, 1 << 20, XPU_DT_BF16, 77, 0, 8);
  AppendRecords(
      &pb, {MakeRecord(1, 1000, 500, 1), MakeRecord(2, 2000, 700, 1), MakeRecord(1, 3000, 500, 2)});
  return pb;
}

TEST(BatchDecoderTest, DecodesValidBatch) {
  SignatureTable table;
  std::vector<xpu_record_v1> out;
  DecodeStats stats;
  ASSERT_TRUE(DecodeProcessBatch(ValidBatch(), table, &out, &stats).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(stats.records, 3u);
  EXPECT_EQ(stats.unknown_sig, 0u);
  EXPECT_EQ(stats.signatures, 2u);
  EXPECT_EQ(out[1].sig_id, 2u);
  EXPECT_EQ(out[1].start_ns, 2000u);
  EXPECT_EQ(out[2].seq, 2u);
  const SignatureInfo* gemm = table.Find(1);
  ASSERT_NE(gemm, nullptr);
  EXPECT_DOUBLE_EQ(gemm->flops, 2.0 * 4096 * 4096 * 4096);
  const SignatureInfo* ar = table.Find(2);
  ASSERT_NE(ar, nullptr);
  EXPECT_TRUE(ar->collective);
  EXPECT_EQ(ar->bytes, (1u << 20) * 2u);
  EXPECT_DOUBLE_EQ(ar->busbw_factor, 2.0 * 7 / 8);
  EXPECT_EQ(table.size(), 2u);
}

TEST(BatchDecoderTest, RejectsTruncatedBlob) {
  for (size_t cut : {1u, 5u, 31u}) {
    xpu::v1::ProcessBatch pb = ValidBatch();
    pb.mutable_records()->resize(pb.records().size() - cut);
    SignatureTable table;
    std::vector<xpu_record_v1> out;
    DecodeStats stats;
    absl::Status st = DecodeProcessBatch(pb, table, &out, &stats);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_NE(st.message().find("not a multiple of 32"), std::string::npos) << st;
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(table.size(), 0u) << "no state change on a rejected batch";
  }
}

TEST(BatchDecoderTest, RejectsMissingIdentity) {
  xpu::v1::ProcessBatch pb = ValidBatch();
  pb.clear_identity();
  EXPECT_EQ(ValidateProcessBatch(pb).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchDecoderTest, SkipsAndCountsUnknownSigIds) {
  xpu::v1::ProcessBatch pb = ValidBatch();
  AppendRecords(&pb, {MakeRecord(9, 1, 1, 1), MakeRecord(0, 1, 1, 1), MakeRecord(1, 5, 5, 5),
                      MakeRecord(0xFFFFFFFFu, 1, 1, 1)});
  SignatureTable table;
  std::vector<xpu_record_v1> out;
  DecodeStats stats;
  ASSERT_TRUE(DecodeProcessBatch(pb, table, &out, &stats).ok());
  EXPECT_EQ(stats.records, 4u);
  EXPECT_EQ(stats.unknown_sig, 3u);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out.back().start_ns, 5u) << "order of accepted records is kept";
}

TEST(BatchDecoderTest, SignaturesPersistAcrossBatches) {
  SignatureTable table;
  std::vector<xpu_record_v1> out;
  DecodeStats stats;
  ASSERT_TRUE(DecodeProcessBatch(ValidBatch(), table, &out, &stats).ok());
  xpu::v1::ProcessBatch second;
  SetIdentity(&second, "job", 0, "h0", 100);
  AppendRecords(&second, {MakeRecord(2, 10, 10, 3)});
  out.clear();
  stats = {};
  ASSERT_TRUE(DecodeProcessBatch(second, table, &out, &stats).ok());
  EXPECT_EQ(stats.records, 1u);
  EXPECT_EQ(stats.unknown_sig, 0u);
}

TEST(BatchDecoderTest, RejectsOutOfRangeSignatureIds) {
  xpu::v1::ProcessBatch pb;
  SetIdentity(&pb, "job", 0, "h0", 1);
  *pb.add_signatures() = MakeKernelSignature(0, "zero");
  *pb.add_signatures() = MakeKernelSignature(kMaxSigId, "too_big");
  *pb.add_signatures() = MakeKernelSignature(kMaxSigId - 1, "largest");
  SignatureTable table;
  std::vector<xpu_record_v1> out;
  DecodeStats stats;
  ASSERT_TRUE(DecodeProcessBatch(pb, table, &out, &stats).ok());
  EXPECT_EQ(stats.bad_signatures, 2u);
  EXPECT_EQ(stats.signatures, 1u);
  EXPECT_NE(table.Find(kMaxSigId - 1), nullptr);
  EXPECT_EQ(table.Find(kMaxSigId), nullptr);
}

TEST(BatchDecoderTest, WrongProtocolVersionConstant) {
  // The version the ingest service enforces is the one in the record ABI.
  EXPECT_EQ(kProtocolVersion, XPU_RECORD_ABI_VERSION);
}

}  // namespace
}  // namespace xpu::engine
