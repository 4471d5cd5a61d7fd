#include "engine/state/batch_decoder.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/wire/record_codec.h"
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

// The compact form decodes to the same records, positions and all; a blob
// that does not decode costs its records (counted, nothing appended) but not
// the rest of the batch; both forms at once is a framing error.
TEST(BatchDecoderTest, CompactRecordsDecodeLikeRaw) {
  xpu::v1::ProcessBatch raw = ValidBatch();
  raw.set_first_position(10);
  for (size_t r = 0; r < raw.records().size(); r += 32) {
    const uint32_t commit = static_cast<uint32_t>(11 + r / 32);
    std::memcpy(&(*raw.mutable_records())[r], &commit, 4);
  }
  xpu::v1::ProcessBatch compact = raw;
  ASSERT_TRUE(wire::CompactProcessBatchRecords(&compact));
  EXPECT_TRUE(compact.records().empty());
  EXPECT_EQ(BatchRecordCount(compact), 3u);
  std::vector<xpu_record_v1> a, b;
  DecodeStats sa, sb;
  SignatureTable ta, tb;
  uint64_t next_a = 11, next_b = 11;  // the first record was received before
  ASSERT_TRUE(DecodeProcessBatch(raw, ta, &a, &sa, &next_a).ok());
  ASSERT_TRUE(DecodeProcessBatch(compact, tb, &b, &sb, &next_b).ok());
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])), 0);
  EXPECT_EQ(sb.duplicates, 1u);
  EXPECT_EQ(next_b, next_a);
  EXPECT_EQ(sb.undecodable, 0u);

  xpu::v1::ProcessBatch broken = compact;
  broken.mutable_compact_records()->push_back('\x7f');  // a trailing byte
  std::vector<xpu_record_v1> c;
  DecodeStats sc;
  SignatureTable tc;
  std::string why;
  ASSERT_TRUE(DecodeProcessBatch(broken, tc, &c, &sc, nullptr, &why).ok());
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(sc.undecodable, 3u);
  EXPECT_EQ(sc.records, 0u);
  EXPECT_EQ(tc.size(), 2u) << "the signatures of the batch still apply";
  EXPECT_NE(why.find("after the last"), std::string::npos) << why;

  xpu::v1::ProcessBatch both = compact;
  both.set_records(raw.records());
  EXPECT_EQ(ValidateProcessBatch(both).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatchDecoderTest, RejectsMissingIdentity) {
  xpu::v1::ProcessBatch pb = ValidBatch();
  pb.clear_identity();
  EXPECT_EQ(ValidateProcessBatch(pb).code(), absl::StatusCode::kInvalidArgument);
}

xpu::v1::ShedRun* AddRun(xpu::v1::ProcessBatch* pb, uint64_t first, uint64_t end, uint64_t n) {
  xpu::v1::ShedRun* r = pb->add_unconfirmed_shed();
  r->set_first_position(first);
  r->set_end_position(end);
  r->set_records(n);
  return r;
}

TEST(BatchDecoderTest, HeldShedRecordsAreThoseBelowTheNextPosition) {
  xpu::v1::ProcessBatch pb = ValidBatch();
  EXPECT_EQ(HeldShedRecords(pb, 1000), 0u);  // none named
  AddRun(&pb, 100, 200, 100);
  AddRun(&pb, 300, 400, 90);  // a gap of 10 inside: 90 records over 100 positions
  EXPECT_TRUE(ValidateProcessBatch(pb).ok());
  EXPECT_EQ(HeldShedRecords(pb, 0), 0u);
  EXPECT_EQ(HeldShedRecords(pb, 100), 0u);
  EXPECT_EQ(HeldShedRecords(pb, 150), 50u);
  EXPECT_EQ(HeldShedRecords(pb, 200), 100u);
  EXPECT_EQ(HeldShedRecords(pb, 250), 100u);
  EXPECT_EQ(HeldShedRecords(pb, 395), 190u);  // bounded by the run's records
  EXPECT_EQ(HeldShedRecords(pb, 400), 190u);
  EXPECT_EQ(HeldShedRecords(pb, UINT64_MAX), 190u);
}

TEST(BatchDecoderTest, RejectsShedRunsOutOfRangeOrTooMany) {
  xpu::v1::ProcessBatch pb = ValidBatch();
  AddRun(&pb, 200, 100, 0);  // ends before it starts
  EXPECT_EQ(ValidateProcessBatch(pb).code(), absl::StatusCode::kInvalidArgument);
  pb.clear_unconfirmed_shed();
  AddRun(&pb, 100, 200, 101);  // more records than positions
  EXPECT_EQ(ValidateProcessBatch(pb).code(), absl::StatusCode::kInvalidArgument);
  pb.clear_unconfirmed_shed();
  for (int i = 0; i < wire::kMaxShedRuns; ++i) AddRun(&pb, i * 10, i * 10 + 5, 5);
  EXPECT_TRUE(ValidateProcessBatch(pb).ok());
  AddRun(&pb, 10000, 10001, 1);
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

TEST(SignaturePoolTest, TablesOfOneJobShareEqualSignaturesOnly) {
  auto pool = std::make_shared<SignaturePool>();
  SignatureTable a(pool), b(pool);
  a.Define(1, ToSignatureInfo(MakeGemmSignature(1, 4096, 4096, 4096)));
  b.Define(1, ToSignatureInfo(MakeGemmSignature(1, 4096, 4096, 4096)));
  ASSERT_NE(a.Find(1), nullptr);
  EXPECT_EQ(a.Find(1), b.Find(1));  // held once
  // Rank-specific fields (the communicator rank) or another id: apart.
  a.Define(2, ToSignatureInfo(MakeCollectiveSignature(2, XPU_OP_ALLREDUCE, 1 << 20, XPU_DT_BF16,
                                                      77, /*comm_rank=*/0, 8)));
  b.Define(2, ToSignatureInfo(MakeCollectiveSignature(2, XPU_OP_ALLREDUCE, 1 << 20, XPU_DT_BF16,
                                                      77, /*comm_rank=*/1, 8)));
  EXPECT_NE(a.Find(2), b.Find(2));
  EXPECT_EQ(a.Find(2)->abi.comm_rank, 0);
  EXPECT_EQ(b.Find(2)->abi.comm_rank, 1);
  b.Define(3, ToSignatureInfo(MakeGemmSignature(3, 4096, 4096, 4096)));
  EXPECT_NE(b.Find(3), a.Find(1));
  EXPECT_EQ(b.Find(3)->abi.commit, 3u);
  // Redefining in one table leaves the other's entry as it was.
  a.Define(1, ToSignatureInfo(MakeKernelSignature(1, "softmax")));
  EXPECT_EQ(a.Find(1)->name, "softmax");
  EXPECT_EQ(b.Find(1)->abi.m, 4096u);
  EXPECT_EQ(a.size(), 2u);
  a.Clear();
  EXPECT_EQ(a.Find(2), nullptr);
  EXPECT_EQ(b.Find(2)->abi.comm_rank, 1);
}

TEST(SignaturePoolTest, ForgottenSignaturesAreSweptAsThePoolGrows) {
  auto pool = std::make_shared<SignaturePool>();
  SignatureTable t(pool);
  // A sender that redefines one id with ever new signatures: the pool
  // stays bounded by what is in use, not by what was ever defined.
  for (uint32_t i = 0; i < 10000; ++i) {
    t.Define(1, ToSignatureInfo(MakeGemmSignature(1, 64 + i, 64, 64)));
  }
  EXPECT_EQ(t.Find(1)->abi.m, 64u + 9999u);
  EXPECT_LE(pool->size(), 64u);
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
