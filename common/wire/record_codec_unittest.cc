#include "common/wire/record_codec.h"

#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace xpu::wire {
namespace {

bool Same(const xpu_record_v1& a, const xpu_record_v1& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

void ExpectRoundTrip(const std::vector<xpu_record_v1>& in) {
  std::string blob;
  EncodeCompactRecords(in.data(), in.size(), &blob);
  EXPECT_EQ(CompactRecordCount(blob), in.size());
  std::vector<xpu_record_v1> out(3);  // decoding appends
  const xpu_record_v1 marker = out[0];
  ASSERT_TRUE(DecodeCompactRecords(blob, &out).ok());
  ASSERT_EQ(out.size(), in.size() + 3);
  EXPECT_TRUE(Same(out[0], marker));
  for (size_t i = 0; i < in.size(); ++i) ASSERT_TRUE(Same(out[i + 3], in[i])) << "record " << i;
}

// A batch shaped like a traced process: a few streams, a few signatures, seq
// counting per signature, positions counting up with gaps now and then.
std::vector<xpu_record_v1> TypicalBatch(std::mt19937_64& rng, size_t n) {
  std::vector<xpu_record_v1> v(n);
  uint64_t t = 1'700'000'000'000'000'000ull;
  uint32_t seq[8] = {};
  uint32_t commit = static_cast<uint32_t>(rng());
  for (auto& r : v) {
    const uint32_t sig = 1 + static_cast<uint32_t>(rng() % 8);
    commit += rng() % 50 == 0 ? 3 : 1;
    r.commit = commit;
    r.sig_id = sig;
    t += 2000 + rng() % 100000;
    r.start_ns = t - (rng() % 4 == 0 ? rng() % 50000 : 0);
    r.duration = static_cast<uint32_t>(rng() % 3 == 0 ? 0 : rng() % 5'000'000);
    r.issue_latency_ns = rng() % 2 ? 0 : static_cast<int32_t>(rng() % 200000) - 1000;
    r.seq = ++seq[sig % 8];
    r.stream = static_cast<uint16_t>(sig % 3);
    r.flags = static_cast<uint16_t>(XPU_REC_TIMED | (sig > 4 ? XPU_REC_SAMPLED : 0));
  }
  return v;
}

TEST(RecordCodec, EmptyBatch) {
  ExpectRoundTrip({});
  std::string blob;
  EncodeCompactRecords(nullptr, 0, &blob);
  EXPECT_EQ(blob.size(), 2u);  // version and count
}

TEST(RecordCodec, TypicalBatchRoundTripsAndShrinks) {
  std::mt19937_64 rng(1);
  const auto in = TypicalBatch(rng, 5000);
  ExpectRoundTrip(in);
  std::string blob;
  EncodeCompactRecords(in.data(), in.size(), &blob);
  EXPECT_LT(blob.size(), in.size() * sizeof(xpu_record_v1) / 2);
}

TEST(RecordCodec, RandomRecordsRoundTrip) {
  std::mt19937_64 rng(2);
  for (int round = 0; round < 200; ++round) {
    std::vector<xpu_record_v1> in(rng() % 300);
    for (auto& r : in) {
      uint8_t bytes[32];
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      std::memcpy(&r, bytes, sizeof(r));
    }
    ExpectRoundTrip(in);
  }
}

TEST(RecordCodec, EveryFieldAtEveryExtreme) {
  const uint64_t u64[] = {0, 1, 0x7f, 0x80, (1ull << 63) - 1, 1ull << 63,
                          std::numeric_limits<uint64_t>::max()};
  const uint32_t u32[] = {0, 1, 0x7f, 0x80, 0x7fffffff, 0x80000000u, 0xffffffffu};
  const int32_t i32[] = {0, 1, -1, std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max()};
  const uint16_t u16[] = {0, 1, 0x7f, 0x80, 0x7fff, 0x8000, 0xffff};
  std::vector<xpu_record_v1> in;
  for (uint64_t s : u64)
    for (uint32_t a : u32) {
      xpu_record_v1 r{};
      r.start_ns = s;
      r.commit = a;
      r.sig_id = ~a;
      r.duration = a;
      r.seq = a ^ 0x55555555u;
      in.push_back(r);
    }
  for (int32_t l : i32)
    for (uint16_t f : u16) {
      xpu_record_v1 r{};
      r.issue_latency_ns = l;
      r.flags = f;
      r.stream = static_cast<uint16_t>(~f);
      r.start_ns = std::numeric_limits<uint64_t>::max() - static_cast<uint64_t>(f);
      in.push_back(r);
    }
  ExpectRoundTrip(in);
  // Worst-case growth is bounded: every field unpredictable.
  std::string blob;
  EncodeCompactRecords(in.data(), in.size(), &blob);
  EXPECT_LE(blob.size(), 11 + in.size() * 42);
}

TEST(RecordCodec, WrapsCommitAndSeq) {
  std::vector<xpu_record_v1> in(4);
  in[0].commit = 0xfffffffeu;
  in[1].commit = 0xffffffffu;
  in[2].commit = 0;  // position + 1 wraps to 0
  in[3].commit = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    in[i].sig_id = 1;
    in[i].seq = 0xfffffffeu + static_cast<uint32_t>(i);
  }
  ExpectRoundTrip(in);
}

absl::Status Decode(std::string_view blob, std::vector<xpu_record_v1>* out) {
  const size_t before = out->size();
  absl::Status st = DecodeCompactRecords(blob, out);
  if (!st.ok()) {
    EXPECT_EQ(out->size(), before) << "nothing appended on error";
  }
  return st;
}

TEST(RecordCodec, RefusesMalformedBlobs) {
  std::vector<xpu_record_v1> out;
  EXPECT_FALSE(Decode("", &out).ok());
  EXPECT_FALSE(Decode(std::string("\x02\x00", 2), &out).ok());  // unknown version
  EXPECT_FALSE(Decode(std::string("\x01", 1), &out).ok());      // no count
  // A count that the bytes cannot hold: refused before any allocation.
  EXPECT_FALSE(Decode(std::string("\x01\xff\xff\xff\xff\x0f\x00\x00", 8), &out).ok());
  EXPECT_EQ(CompactRecordCount(std::string("\x01\xff\xff\xff\xff\x0f\x00\x00", 8)), 1u);
  EXPECT_FALSE(Decode(std::string("\x01\x01\x80\x00", 4), &out).ok());  // fields missing
  // Overlong (non-canonical) start delta.
  EXPECT_FALSE(Decode(std::string("\x01\x01\x7f\x80\x00", 5), &out).ok());
  // An 11-byte varint.
  EXPECT_FALSE(Decode(std::string("\x01\x01\x7f\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14),
                      &out)
                   .ok());
  // flags above 16 bits.
  EXPECT_FALSE(Decode(std::string("\x01\x01\x7b\x80\x80\x04\x00", 7), &out).ok());
  // Trailing bytes after the declared records.
  EXPECT_TRUE(Decode(std::string("\x01\x01\x7f\x00", 4), &out).ok());
  EXPECT_FALSE(Decode(std::string("\x01\x01\x7f\x00\x00", 5), &out).ok());
  EXPECT_EQ(out.size(), 1u);
}

TEST(RecordCodec, EveryTruncationFails) {
  std::mt19937_64 rng(3);
  const auto in = TypicalBatch(rng, 64);
  std::string blob;
  EncodeCompactRecords(in.data(), in.size(), &blob);
  std::vector<xpu_record_v1> out;
  for (size_t len = 0; len < blob.size(); ++len) {
    EXPECT_FALSE(Decode(std::string_view(blob).substr(0, len), &out).ok()) << len;
  }
  EXPECT_TRUE(out.empty());
}

// Fuzz-style: mutated valid blobs and random bytes never crash, never
// produce more than the blob can declare, and either decode fully or leave
// the output untouched.
TEST(RecordCodec, HostileInputIsBounded) {
  std::mt19937_64 rng(4);
  size_t refused = 0, accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string blob;
    if (round % 4 == 0) {
      blob.resize(rng() % 200);
      for (auto& c : blob) c = static_cast<char>(rng());
      if (!blob.empty() && rng() % 2) blob[0] = static_cast<char>(kCompactVersion);
    } else {
      const auto in = TypicalBatch(rng, 1 + rng() % 40);
      EncodeCompactRecords(in.data(), in.size(), &blob);
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        const size_t at = rng() % blob.size();
        switch (rng() % 3) {
          case 0: blob[at] = static_cast<char>(blob[at] ^ (1u << (rng() % 8))); break;
          case 1: blob.erase(at, 1 + rng() % 3); break;
          default: blob.insert(at, 1, static_cast<char>(rng())); break;
        }
        if (blob.empty()) break;
      }
    }
    std::vector<xpu_record_v1> out;
    absl::Status st = Decode(blob, &out);
    if (st.ok()) {
      ++accepted;
      ASSERT_LE(out.size(), blob.size() / 2);
      ASSERT_EQ(out.size(), CompactRecordCount(blob));
      // What was accepted encodes back into something that decodes the same.
      std::string again;
      EncodeCompactRecords(out.data(), out.size(), &again);
      std::vector<xpu_record_v1> twice;
      ASSERT_TRUE(DecodeCompactRecords(again, &twice).ok());
      ASSERT_EQ(twice.size(), out.size());
      for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(Same(out[i], twice[i]));
    } else {
      ++refused;
      EXPECT_FALSE(st.message().empty());
    }
  }
  // Both outcomes happened: the mutations reach the checks and pass them.
  EXPECT_GT(refused, 1000u);
  EXPECT_GT(accepted, 100u);
}

}  // namespace
}  // namespace xpu::wire
