#include "common/ring/ring_reader.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "common/ring/testing/test_ring_writer.h"

namespace xpu::ring {
namespace {

using testing::TestRingConfig;
using testing::TestRingWriter;

RingReaderOptions Opts(uint64_t grace_ns = 1000) {
  RingReaderOptions o;
  o.abandon_grace_ns = grace_ns;
  return o;
}

TEST(RingReaderTest, RoundTripRecordsSignaturesAndIdentity) {
  TestRingConfig cfg;
  cfg.job = "job-rt";
  cfg.rank = 3;
  auto w = TestRingWriter::Create(cfg);
  ASSERT_NE(w, nullptr);
  xpu_signature_v1 shape{};
  shape.m = 128;
  shape.n = 256;
  shape.k = 64;
  shape.batch = 2;
  shape.dtype = XPU_DT_BF16;
  const uint32_t gemm = w->AddSignature(XPU_OP_GEMM, "cublasGemmEx", &shape);
  const std::string long_name(300, 'k');
  const uint32_t kern = w->AddSignature(XPU_OP_KERNEL, long_name);
  for (uint32_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        w->Write(TestRingWriter::MakeRecord(i % 2 ? gemm : kern, 1000 + i, 10 * i, XPU_REC_TIMED)));
  }
  auto reader_or = RingReader::FromFd(w->fd(), Opts());
  ASSERT_TRUE(reader_or.ok()) << reader_or.status();
  auto& reader = *reader_or;
  EXPECT_EQ(reader->identity().job, "job-rt");
  EXPECT_EQ(reader->identity().rank, 3);
  EXPECT_EQ(reader->identity().start_time_ticks, cfg.start_time_ticks);
  EXPECT_TRUE(reader->shrink_sealed());

  std::vector<SignatureInfo> sigs;
  reader->PollSignatures(&sigs);
  ASSERT_EQ(sigs.size(), 2u);
  EXPECT_EQ(sigs[0].name, "cublasGemmEx");
  EXPECT_EQ(sigs[0].sig.m, 128u);
  EXPECT_EQ(sigs[1].name, long_name);

  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 1000, &recs), 10u);
  ASSERT_EQ(recs.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(recs[i].position, i);
    EXPECT_EQ(recs[i].rec.start_ns, 1000 + i);
    EXPECT_EQ(recs[i].rec.duration, 10 * i);
    EXPECT_EQ(recs[i].rec.commit, 0u);
  }
  EXPECT_TRUE(reader->Drained());
  EXPECT_EQ(w->header()->read_index, 10u);
  EXPECT_EQ(reader->counters().records_read, 10u);
  EXPECT_EQ(reader->counters().records_corrupt, 0u);
  // Nothing new: no records, no signatures.
  recs.clear();
  sigs.clear();
  EXPECT_EQ(reader->Poll(0, 1000, &recs), 0u);
  reader->PollSignatures(&sigs);
  EXPECT_TRUE(sigs.empty());
}

TEST(RingReaderTest, WrapAroundKeepsOrderAndFullRingDrops) {
  TestRingConfig cfg;
  cfg.ring_capacity = 8;
  auto w = TestRingWriter::Create(cfg);
  ASSERT_NE(w, nullptr);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  uint64_t next = 0;
  std::vector<RingRecord> recs;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, next + i, 1, 0)));
    next += 5;
    reader->Poll(0, 3, &recs);  // partial drains force wrap with unread data
    reader->Poll(0, 100, &recs);
  }
  ASSERT_EQ(recs.size(), 100u);
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].rec.start_ns, i);
    EXPECT_EQ(recs[i].position, i);
  }
  // A full ring drops at the producer and counts it; the reader sees no loss.
  for (int i = 0; i < 10; ++i) w->Write(TestRingWriter::MakeRecord(sig, 0, 1, 0));
  EXPECT_EQ(reader->ReadLiveState().counters[XPU_CNT_DROPPED_FULL], 2u);
  recs.clear();
  EXPECT_EQ(reader->Poll(0, 100, &recs), 8u);
  EXPECT_EQ(reader->counters().records_lapped, 0u);
}

TEST(RingReaderTest, LappingIsCountedAndReaderJumpsForward) {
  TestRingConfig cfg;
  cfg.ring_capacity = 8;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  for (uint64_t i = 0; i < 20; ++i) w->WriteOverwriting(TestRingWriter::MakeRecord(sig, i, 1, 0));
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 100, &recs), 8u);
  EXPECT_EQ(reader->counters().records_lapped, 12u);
  ASSERT_EQ(recs.size(), 8u);
  EXPECT_EQ(recs.front().rec.start_ns, 12u);
  EXPECT_EQ(recs.back().rec.start_ns, 19u);
}

TEST(RingReaderTest, SlotReusedByLaterLapIsCountedAsLapped) {
  TestRingConfig cfg;
  cfg.ring_capacity = 8;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  for (uint64_t i = 0; i < 4; ++i) w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0));
  // Slot of position 1 already carries the commit of position 9.
  w->slot(1)->commit = 10;
  std::vector<RingRecord> recs;
  reader->Poll(0, 100, &recs);
  EXPECT_EQ(recs.size(), 3u);
  EXPECT_EQ(reader->counters().records_lapped, 1u);
}

TEST(RingReaderTest, AbandonedSlotsSkippedAfterGraceOnly) {
  TestRingConfig cfg;
  cfg.ring_capacity = 16;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(/*grace_ns=*/1000)).value());
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, 0));
  w->ReserveWithoutCommit();
  w->ReserveWithoutCommit();
  w->Write(TestRingWriter::MakeRecord(sig, 2, 1, 0));
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(5000, 100, &recs), 1u);  // stalls at position 1
  EXPECT_FALSE(reader->Drained());
  EXPECT_EQ(reader->Poll(5500, 100, &recs), 0u);  // still within grace
  EXPECT_EQ(reader->counters().records_abandoned, 0u);
  EXPECT_EQ(reader->Poll(6000, 100, &recs), 1u);  // both skipped by one grace period
  EXPECT_EQ(reader->counters().records_abandoned, 2u);
  EXPECT_TRUE(reader->Drained());
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].rec.start_ns, 2u);
}

TEST(RingReaderTest, InFlightSlotThatCommitsLateIsRead) {
  TestRingConfig cfg;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(1000000)).value());
  const uint64_t p = w->ReserveWithoutCommit();
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 100, &recs), 0u);
  xpu_record_v1* s = w->slot(p);
  *s = TestRingWriter::MakeRecord(sig, 99, 1, 0);
  __atomic_store_n(&s->commit, static_cast<uint32_t>(p + 1), __ATOMIC_RELEASE);
  EXPECT_EQ(reader->Poll(10, 100, &recs), 1u);
  EXPECT_EQ(reader->counters().records_abandoned, 0u);
}

TEST(RingReaderTest, InvalidRecordsAreCountedNotReturned) {
  auto w = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  w->Write(TestRingWriter::MakeRecord(0, 1, 1, 0));           // sig 0
  w->Write(TestRingWriter::MakeRecord(60000, 1, 1, 0));       // beyond table
  w->Write(TestRingWriter::MakeRecord(sig + 5, 1, 1, 0));     // never published
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, 1u << 15));  // unknown flag
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, XPU_REC_TIMED | XPU_REC_NOT_TIMED));
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, XPU_REC_TIMED));  // good
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 100, &recs), 1u);
  EXPECT_EQ(reader->counters().records_corrupt, 5u);
  EXPECT_EQ(reader->counters().records_read, 1u);
}

// Every flag record.h defines is accepted; XPU_REC_UNTRACKED (the hook's
// CPU-side record of an op it could not completion-track) was once rejected
// as corruption because the mask stopped one bit short.
TEST(RingReaderTest, EveryDefinedFlagIsAccepted) {
  auto w = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = w->AddSignature(XPU_OP_GEMM, "cublasGemmEx");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED));
  for (uint32_t bit = 0; (1u << bit) <= XPU_REC_UNTRACKED; ++bit) {
    if ((1u << bit) == XPU_REC_NOT_TIMED) continue;  // TIMED and NOT_TIMED exclude each other
    w->Write(TestRingWriter::MakeRecord(sig, 2 + bit, 1, static_cast<uint16_t>(1u << bit)));
  }
  std::vector<RingRecord> recs;
  reader->Poll(0, 100, &recs);
  EXPECT_EQ(reader->counters().records_corrupt, 0u);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0].rec.flags, XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED);
}

TEST(RingReaderTest, CorruptSignaturesAndBadNameReferences) {
  TestRingConfig cfg;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t good = w->AddSignature(XPU_OP_ALLREDUCE, "allreduce");
  const uint32_t bad_kind = w->AddSignature(XPU_OP_KERNEL, "x");
  w->sig_entry(bad_kind)->kind = 999;
  const uint32_t bad_name = w->AddSignature(XPU_OP_KERNEL, std::string(100, 'n'));
  w->sig_entry(bad_name)->name_off = 0xFFFFFF00u;  // outside the arena
  const uint32_t bad_commit = w->AddSignature(XPU_OP_KERNEL, "y");
  w->sig_entry(bad_commit)->commit = 12345;
  const uint32_t ctrl = w->AddSignature(XPU_OP_KERNEL, std::string("a\x01\xff", 3));
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  std::vector<SignatureInfo> sigs;
  reader->PollSignatures(&sigs);
  ASSERT_EQ(sigs.size(), 3u);
  EXPECT_EQ(sigs[0].sig.commit, good);
  EXPECT_EQ(sigs[1].sig.commit, bad_name);
  EXPECT_EQ(sigs[1].name, std::string(XPU_SIG_NAME_INLINE, 'n'));  // inline prefix
  EXPECT_EQ(sigs[2].name, "a??");
  EXPECT_EQ(sigs[2].sig.commit, ctrl);
  EXPECT_EQ(reader->counters().signatures_corrupt, 2u);
  EXPECT_EQ(reader->counters().names_bad, 1u);
  // Records of a corrupt signature are rejected.
  w->Write(TestRingWriter::MakeRecord(bad_kind, 1, 1, 0));
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 10, &recs), 0u);
  EXPECT_EQ(reader->counters().records_corrupt, 1u);
}

TEST(RingReaderTest, SignatureReadOnDemandForRecordIsReportedOnce) {
  auto w = TestRingWriter::Create(TestRingConfig{});
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "late");
  w->header()->sig_count = 0;  // the hint is only a hint
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, 0));
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 10, &recs), 1u);
  std::vector<SignatureInfo> sigs;
  reader->PollSignatures(&sigs);
  ASSERT_EQ(sigs.size(), 1u);
  EXPECT_EQ(sigs[0].name, "late");
  sigs.clear();
  reader->PollSignatures(&sigs);
  EXPECT_TRUE(sigs.empty());
}

// --- header validation -----------------------------------------------------

class HeaderCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    w_ = TestRingWriter::Create(TestRingConfig{});
    ASSERT_NE(w_, nullptr);
  }
  absl::Status Open(uint64_t max = 4ull << 30) {
    RingReaderOptions o;
    o.max_file_size = max;
    return RingReader::FromFd(w_->fd(), o).status();
  }
  std::unique_ptr<TestRingWriter> w_;
};

TEST_F(HeaderCorruptionTest, GoodHeaderOpens) { EXPECT_TRUE(Open().ok()); }

TEST_F(HeaderCorruptionTest, BadMagic) {
  w_->header()->magic ^= 1;
  EXPECT_EQ(Open().code(), absl::StatusCode::kInvalidArgument);
}
TEST_F(HeaderCorruptionTest, BadAbiVersion) {
  w_->header()->abi_version = 2;
  EXPECT_EQ(Open().code(), absl::StatusCode::kFailedPrecondition);
}
TEST_F(HeaderCorruptionTest, BadSizes) {
  w_->header()->record_size = 64;
  EXPECT_FALSE(Open().ok());
  w_->header()->record_size = 32;
  w_->header()->signature_size = 127;
  EXPECT_FALSE(Open().ok());
  w_->header()->signature_size = 128;
  w_->header()->header_size = 8192;
  EXPECT_FALSE(Open().ok());
}
TEST_F(HeaderCorruptionTest, CapacityNotPowerOfTwo) {
  w_->header()->ring_capacity = 1000;
  EXPECT_FALSE(Open().ok());
  w_->header()->ring_capacity = 0;
  EXPECT_FALSE(Open().ok());
}
TEST_F(HeaderCorruptionTest, GiantCapacities) {
  w_->header()->ring_capacity = 1u << 31;
  EXPECT_FALSE(Open().ok());
  w_->header()->ring_capacity = 1024;
  w_->header()->sig_capacity = 0xFFFFFFFFu;
  EXPECT_FALSE(Open().ok());
  w_->header()->sig_capacity = 64;
  w_->header()->str_capacity = ~0ull;
  EXPECT_FALSE(Open().ok());
}
TEST_F(HeaderCorruptionTest, OffsetsOutsideOrOverflowing) {
  const auto h0 = *w_->header();
  w_->header()->ring_offset = ~0ull - 100;
  EXPECT_FALSE(Open().ok());
  *w_->header() = h0;
  w_->header()->sig_offset = w_->size();
  EXPECT_FALSE(Open().ok());
  *w_->header() = h0;
  w_->header()->str_offset = ~0ull;
  EXPECT_FALSE(Open().ok());
  *w_->header() = h0;
  w_->header()->ring_offset = 0;  // over the header
  EXPECT_FALSE(Open().ok());
  *w_->header() = h0;
  w_->header()->sig_offset = h0.ring_offset;  // overlapping sections
  EXPECT_FALSE(Open().ok());
  *w_->header() = h0;
  w_->header()->ring_offset = h0.ring_offset + 4;  // misaligned
  EXPECT_FALSE(Open().ok());
}
TEST_F(HeaderCorruptionTest, FileSizeLargerThanRealFile) {
  w_->header()->file_size = w_->size() * 2;
  EXPECT_FALSE(Open().ok());
}
TEST_F(HeaderCorruptionTest, TruncatedFile) {
  // The file is shorter than the header claims (a shorter fstat size). Each
  // attempt seals the memfd against shrinking, so use a fresh ring each time.
  for (uint64_t size : {w_->size() / 2, w_->size() - 1, uint64_t{100}, uint64_t{0}}) {
    w_ = TestRingWriter::Create(TestRingConfig{});
    ASSERT_EQ(ftruncate(w_->fd(), static_cast<off_t>(size)), 0);
    EXPECT_FALSE(Open().ok()) << size;
  }
}
TEST_F(HeaderCorruptionTest, AcceptedRingIsSealedAgainstShrinking) {
  ASSERT_TRUE(Open().ok());
  EXPECT_NE(ftruncate(w_->fd(), 100), 0);
}
TEST_F(HeaderCorruptionTest, LargerThanLimit) {
  EXPECT_EQ(Open(/*max=*/8192).code(), absl::StatusCode::kResourceExhausted);
}
TEST_F(HeaderCorruptionTest, NotARegularFile) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(RingReader::FromFd(fds[0], RingReaderOptions{}).ok());
  close(fds[0]);
  close(fds[1]);
}

TEST(RingReaderTest, HostileLiveIndicesNeverCrash) {
  TestRingConfig cfg;
  cfg.ring_capacity = 8;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  w->Write(TestRingWriter::MakeRecord(sig, 1, 1, 0));
  std::vector<RingRecord> recs;
  reader->Poll(0, 10, &recs);
  w->header()->write_index = 0;  // goes backwards
  EXPECT_EQ(reader->Poll(0, 10, &recs), 0u);
  EXPECT_EQ(reader->counters().index_regressions, 1u);
  EXPECT_EQ(reader->counters().resyncs, 1u);
  EXPECT_EQ(w->header()->read_index, 0u);  // the producer may write again
  w->header()->write_index = ~0ull;  // jumps to the end of time
  reader->Poll(0, 1000, &recs);
  // A resynchronization, not 2^64 lapped records: nothing was lost (the one
  // record written had been read), and no counter wraps.
  EXPECT_EQ(reader->counters().resyncs, 2u);
  EXPECT_EQ(reader->counters().records_lapped, 0u);
  EXPECT_LE(reader->counters().LostTotal(), cfg.ring_capacity);
  w->header()->sig_count = ~0ull;
  std::vector<SignatureInfo> sigs;
  reader->PollSignatures(&sigs);
  w->header()->str_used = ~0ull;
  w->header()->producer_state = 77;
  (void)reader->ReadLiveState();
}

// --- corrupted indices, daemon restarts: every record the hook wrote is
// read or counted lost, exactly, and no counter wraps.

uint64_t Written(TestRingWriter& w) { return w.header()->counters[XPU_CNT_RECORDS_WRITTEN]; }

// Read + lost == written, the invariant of every test below.
void ExpectAccounted(TestRingWriter& w, const RingReader& r, uint64_t read) {
  EXPECT_EQ(read + r.counters().LostTotal(), Written(w))
      << "read " << read << " lost " << r.counters().LostTotal();
  EXPECT_EQ(r.records_accounted(), Written(w));
}

TEST(RingReaderTest, WriteIndexCorruptedBackwardsResyncsAndCounts) {
  TestRingConfig cfg;
  cfg.ring_capacity = 64;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  std::vector<RingRecord> recs;
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  reader->Poll(0, 1000, &recs);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  // Random bytes over the positions: write_index far behind, read_index past it.
  w->header()->write_index = 3;
  w->header()->read_index = 1000;
  // Before the reader notices, the producer cannot write (full as it sees it).
  EXPECT_FALSE(w->Write(TestRingWriter::MakeRecord(sig, 0, 1, 0)));
  reader->Poll(0, 1000, &recs);
  EXPECT_EQ(reader->counters().resyncs, 1u);
  EXPECT_EQ(reader->counters().records_resync, 5u);  // the unread ones
  EXPECT_EQ(w->header()->read_index, 3u);
  // The producer writes again and the reader reads it.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  reader->Poll(0, 1000, &recs);
  EXPECT_EQ(recs.size(), 70u);
  ExpectAccounted(*w, *reader, recs.size());
  // The ring positions moved back; the sequence (what the engine
  // deduplicates by) keeps growing, past the records counted lost.
  EXPECT_LT(recs[40].position, recs[39].position);
  for (size_t i = 1; i < recs.size(); ++i) EXPECT_GT(recs[i].sequence, recs[i - 1].sequence) << i;
  EXPECT_EQ(recs[40].sequence, recs[39].sequence + 1 + reader->counters().records_resync);
  EXPECT_EQ(recs.back().sequence + 1, reader->records_accounted());
}

TEST(RingReaderTest, WriteIndexCorruptedForwardResyncsAndCounts) {
  TestRingConfig cfg;
  cfg.ring_capacity = 64;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  RingReaderOptions o = Opts(1000);
  o.max_in_flight = 8;
  auto reader = std::move(RingReader::FromFd(w->fd(), o).value());
  std::vector<RingRecord> recs;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  reader->Poll(0, 1000, &recs);
  for (uint64_t jump : {uint64_t{40}, uint64_t{1} << 40, ~uint64_t{0} - 100}) {
    // Within a lap: the slots ahead never commit; beyond a lap: at once.
    ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, 1, 1, 0)));
    w->header()->write_index += jump;
    reader->Poll(0, 1000, &recs);
    reader->Poll(5000, 1000, &recs);  // past the grace period
    ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, 2, 1, 0)));
    reader->Poll(6000, 1000, &recs);
  }
  EXPECT_EQ(reader->counters().resyncs, 3u);
  EXPECT_EQ(reader->counters().records_abandoned, 0u);  // not a crashed writer
  EXPECT_EQ(reader->counters().records_lapped, 0u);
  ExpectAccounted(*w, *reader, recs.size());
  EXPECT_LT(reader->counters().LostTotal(), 10u);
}

TEST(RingReaderTest, RestartedReaderReplaysWhatWasNotAcknowledged) {
  TestRingConfig cfg;
  cfg.ring_capacity = 64;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  std::vector<RingRecord> first;
  {
    auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
    reader->Poll(0, 1000, &first);
    reader->Acknowledge(first[19].position + 1);  // the engine has the first 20
    EXPECT_EQ(reader->acked_index(), 20u);
  }  // killed before the rest reached the engine
  for (int i = 30; i < 40; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  std::vector<RingRecord> recs;
  reader->Poll(0, 1000, &recs);
  ASSERT_EQ(recs.size(), 20u);
  EXPECT_EQ(recs.front().position, 20u);  // resumed at the acknowledged position
  EXPECT_EQ(recs.front().rec.start_ns, 20u);
  EXPECT_EQ(reader->counters().records_replayed, 10u);
  EXPECT_EQ(reader->counters().LostTotal(), 0u);
  EXPECT_FALSE(reader->replaying());
}

TEST(RingReaderTest, RestartLossesAreCountedOnceAcrossReaders) {
  TestRingConfig cfg;
  cfg.ring_capacity = 16;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  uint64_t delivered = 0;
  {
    auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
    std::vector<RingRecord> recs;
    for (int i = 0; i < 12; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
    // One record fails validation (its own loss, counted by this reader).
    w->slot(11)->flags = 0x8000;
    reader->Poll(0, 1000, &recs);
    EXPECT_EQ(reader->counters().records_corrupt, 1u);
    reader->Acknowledge(4);
    delivered = 4;
    // Shed from the daemon's buffer after reading: counted, persisted.
    reader->AddLoss(XPU_LOSS_BUFFER, 4, 2);
  }  // killed: positions 4..11 were read but not acknowledged
  // Meanwhile the hook laps the dead daemon's unacknowledged records.
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  EXPECT_EQ(reader->counters().records_corrupt, 1u);  // restored from the ring
  EXPECT_EQ(reader->counters().records_buffer, 2u);
  std::vector<RingRecord> recs;
  reader->Poll(0, 1000, &recs);
  EXPECT_EQ(recs.size(), 16u);  // what is still in the ring
  // 8 unacknowledged positions (4..11) were overwritten: 2 of them were
  // already counted (buffer) and 1 (corrupt); 5 are new losses, due to the
  // restart.
  EXPECT_EQ(reader->counters().records_restart, 5u);
  EXPECT_EQ(delivered + recs.size() + reader->counters().LostTotal(), Written(*w));
}

TEST(RingReaderTest, ConsumerBlockThatDoesNotFitTheIndicesIsIgnored) {
  TestRingConfig cfg;
  cfg.ring_capacity = 16;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  w->header()->read_index = 5;
  auto* c = reinterpret_cast<xpu_ring_consumer_v1*>(w->base() + XPU_RING_CONSUMER_OFFSET);
  c->magic = XPU_RING_CONSUMER_MAGIC;
  c->acked_index = 99;  // beyond read_index: scribbled over
  c->lost[XPU_LOSS_CORRUPT] = ~0ull;
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  EXPECT_EQ(reader->cursor(), 5u);
  EXPECT_EQ(reader->counters().records_corrupt, 0u);
}

TEST(RingReaderTest, RandomBytesInLiveSectionsNeverCrash) {
  TestRingConfig cfg;
  cfg.ring_capacity = 64;
  auto w = TestRingWriter::Create(cfg);
  w->AddSignature(XPU_OP_KERNEL, "k");
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts(0)).value());
  std::mt19937_64 rng(1234);
  const uint64_t body = w->header()->ring_offset;
  uint64_t accepted = 0;
  for (int iter = 0; iter < 200; ++iter) {
    for (uint64_t i = body; i < w->size(); i += 8) {
      uint64_t v = rng();
      memcpy(w->base() + i, &v, 8);
    }
    w->header()->write_index = reader->cursor() + (rng() % 200);
    w->header()->sig_count = rng() % 100;
    std::vector<RingRecord> recs;
    accepted += reader->Poll(iter, 1000, &recs);
    std::vector<SignatureInfo> sigs;
    reader->PollSignatures(&sigs);
    for (const auto& r : recs) {
      EXPECT_NE(r.rec.sig_id, 0u);
      EXPECT_LT(r.rec.sig_id, cfg.sig_capacity);
      EXPECT_EQ(r.rec.flags & ~kKnownRecordFlags, 0);
    }
  }
  const auto& c = reader->counters();
  EXPECT_EQ(c.records_read, accepted);
}

TEST(RingReaderTest, FileShrunkAfterMappingFaultsCleanly) {
  TestRingConfig cfg;
  cfg.sealable = false;  // as a ring file on disk, or a memfd without MFD_ALLOW_SEALING
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, std::string(100, 'x'));
  for (int i = 0; i < 10; ++i) w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0));
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  EXPECT_FALSE(reader->shrink_sealed());
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 3, &recs), 3u);
  // The file shrinks to its header page: slots, signatures and names are
  // gone. Any touch would be SIGBUS without the guard.
  ASSERT_EQ(ftruncate(w->fd(), XPU_RING_HEADER_SIZE), 0);
  EXPECT_EQ(reader->Poll(0, 100, &recs), 0u);
  EXPECT_FALSE(reader->faulted());
  EXPECT_TRUE(reader->truncated());
  // What was written and not read is counted, nothing more read.
  EXPECT_EQ(reader->counters().records_truncated, 7u);
  EXPECT_TRUE(reader->Drained());
  std::vector<SignatureInfo> sigs;
  reader->PollSignatures(&sigs);
  // The hook goes on in private pages (hook/ring/ring_fault_guard.h); its
  // indices and counters are still the file's.
  w->header()->write_index += 5;
  w->header()->counters[XPU_CNT_RECORDS_WRITTEN] += 5;
  EXPECT_FALSE(reader->Drained());
  EXPECT_EQ(reader->Poll(0, 100, &recs), 0u);
  EXPECT_EQ(reader->counters().records_truncated, 12u);
  EXPECT_EQ(reader->counters().records_read + reader->counters().LostTotal(),
            w->header()->counters[XPU_CNT_RECORDS_WRITTEN]);
  EXPECT_EQ(w->header()->read_index, 15u);  // the hook's ring never looks full
  // The loss is in the consumer block; a new reader refuses the short file.
  const auto* block =
      reinterpret_cast<const xpu_ring_consumer_v1*>(w->base() + XPU_RING_CONSUMER_OFFSET);
  EXPECT_EQ(block->lost[XPU_LOSS_TRUNCATED], 12u);
  EXPECT_FALSE(RingReader::FromFd(w->fd(), Opts()).ok());
  // A corrupted write_index counts no more than the hook wrote.
  w->header()->write_index += 1000000;
  w->header()->counters[XPU_CNT_RECORDS_WRITTEN] += 2;
  reader->Poll(0, 100, &recs);
  EXPECT_EQ(reader->counters().records_truncated, 14u);
  const RingLiveState before = reader->ReadLiveState();
  // And to nothing at all: even the header is gone.
  ASSERT_EQ(ftruncate(w->fd(), 0), 0);
  auto reader2 = RingReader::FromFd(w->fd(), Opts());
  EXPECT_FALSE(reader2.ok());
  EXPECT_EQ(reader->Poll(0, 100, &recs), 0u);
  EXPECT_TRUE(reader->faulted());
  EXPECT_TRUE(reader->Drained());
  // The live state keeps its last good values instead of zeros.
  EXPECT_EQ(reader->ReadLiveState().counters[XPU_CNT_RECORDS_WRITTEN],
            before.counters[XPU_CNT_RECORDS_WRITTEN]);
  EXPECT_EQ(recs.size(), 3u);
}

TEST(RingReaderTest, HeaderPageLostCountsWhatWasSeenWrittenAndNotRead) {
  TestRingConfig cfg;
  cfg.sealable = false;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  for (int i = 0; i < 10; ++i) w->Write(TestRingWriter::MakeRecord(sig, i, 1, 0));
  auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 4, &recs), 4u);  // saw write_index 10, read 4
  ASSERT_EQ(ftruncate(w->fd(), 0), 0);
  EXPECT_EQ(reader->Poll(0, 100, &recs), 0u);
  EXPECT_TRUE(reader->faulted());
  EXPECT_FALSE(reader->truncated());
  EXPECT_EQ(reader->counters().records_truncated, 6u);
  EXPECT_TRUE(reader->Drained());
  // Never read, the live state says what the reader saw written.
  EXPECT_EQ(reader->ReadLiveState().counters[XPU_CNT_RECORDS_WRITTEN], 10u);
  EXPECT_EQ(reader->ReadLiveState().write_index, 10u);
}

TEST(RingReaderTest, SigbusOutsideTheGuardStillKills) {
  // The guard must not swallow faults elsewhere in the process.
  EXPECT_DEATH(
      {
        TestRingConfig cfg;
        cfg.sealable = false;
        auto w = TestRingWriter::Create(cfg);
        auto reader = std::move(RingReader::FromFd(w->fd(), Opts()).value());
        ASSERT_EQ(ftruncate(w->fd(), 0), 0);
        volatile uint8_t b = w->base()[w->size() - 1];  // unguarded access
        (void)b;
      },
      "");
}

TEST(RingReaderTest, ReadOnlyStartsAtOldestAndDoesNotWrite) {
  TestRingConfig cfg;
  cfg.ring_capacity = 8;
  auto w = TestRingWriter::Create(cfg);
  const uint32_t sig = w->AddSignature(XPU_OP_KERNEL, "k");
  for (uint64_t i = 0; i < 12; ++i) w->WriteOverwriting(TestRingWriter::MakeRecord(sig, i, 1, 0));
  RingReaderOptions o;
  o.read_only = true;
  o.abandon_grace_ns = 0;
  const std::string path = "/proc/self/fd/" + std::to_string(w->fd());
  auto reader = std::move(RingReader::FromPath(path, o).value());
  std::vector<RingRecord> recs;
  EXPECT_EQ(reader->Poll(0, 100, &recs), 8u);
  EXPECT_EQ(recs.front().rec.start_ns, 4u);
  EXPECT_EQ(w->header()->read_index, 0u);
}

}  // namespace
}  // namespace xpu::ring
