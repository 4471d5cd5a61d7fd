// tests/e2e_hook/ring_dump_corrupt_test.cc — xpu-ring-dump on hostile input:
// random bytes, truncated files, and bit-flipped copies of a real ring written
// by libxpu_hook.so under xpu-fake-train. The tool must count what it rejects
// and exit with a status (0: dumped, 1: not a ring), never die of a signal or
// hang.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "e2e_util.h"
#include "ring_file.h"

namespace xpu::e2e {
namespace {

// The value of "key": in the "reader" object of the --json header line.
int64_t ReaderCount(const std::string& json, const std::string& key) {
  size_t at = json.find("\"reader\":{");
  if (at == std::string::npos) return -1;
  size_t k = json.find("\"" + key + "\":", at);
  if (k == std::string::npos) return -1;
  return strtoll(json.c_str() + k + key.size() + 3, nullptr, 10);
}

RunResult Dump(const std::string& path) {
  return Run({XPU_RING_DUMP_PATH, "--json", path}, {}, 30);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Exits by itself (never a signal, never a timeout) with 0 or 1.
void ExpectCleanExit(const RunResult& r, const std::string& what) {
  EXPECT_FALSE(r.timed_out) << what;
  EXPECT_EQ(r.signal, 0) << what << ": killed by signal " << r.signal;
  EXPECT_TRUE(r.exited && (r.status == 0 || r.status == 1))
      << what << ": status " << r.status << "\n"
      << r.err;
}

class RingDumpCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    // A real ring: a short training run under the hook, timing every op.
    RunResult rr = xpu::e2e::Run({XPU_FAKE_TRAIN_PATH, "--steps", "4", "--layers", "1", "--hidden",
                                  "64", "--tokens", "32", "--step-sleep-ms", "40"},
                                 {{"LD_PRELOAD", XPU_HOOK_SO},
                                  {"LD_LIBRARY_PATH", XPU_FAKE_LIB_DIR},
                                  {"XPU_RING_DIR", dir_.path()},
                                  {"XPU_DAEMON", "off"},
                                  {"XPU_DAEMON_SOCKET", dir_.path() + "/no-daemon.sock"},
                                  {"XPU_TIMING", "all"},
                                  {"RANK", "0"},
                                  {"WORLD_SIZE", "1"}},
                                 60);
    ASSERT_TRUE(rr.exited && rr.status == 0) << rr.err;
    auto rings = ListFiles(dir_.path(), "xpu-ring-");
    ASSERT_EQ(rings.size(), 1u);
    ring_path_ = rings[0];
    bytes_ = ReadFile(ring_path_);
    std::string err;
    ASSERT_TRUE(ring_.Load(ring_path_, &err)) << err;
    ASSERT_GT(ring_.records.size(), 4u);
    ASSERT_GT(ring_.sigs.size(), 2u);
    RunResult d = Dump(ring_path_);
    ASSERT_TRUE(d.exited && d.status == 0) << d.err;
    // Baseline of the unmodified ring; the corruption tests check deltas
    // (RealRingReadsClean checks the baseline itself).
    base_json_ = d.out;
    base_records_ = ReaderCount(d.out, "records");
    base_corrupt_ = ReaderCount(d.out, "corrupt");
    ASSERT_GE(base_records_, 0);
    // Records the dump accepts (no flag outside record.h's set), to mutate.
    for (size_t i = 0; i < ring_.records.size(); ++i) {
      if ((ring_.records[i].flags & ~uint32_t{(XPU_REC_UNTRACKED << 1) - 1}) == 0 &&
          (ring_.records[i].flags & XPU_REC_TIMED)) {
        timed_.push_back(i);
      }
    }
    ASSERT_GE(timed_.size(), 3u);
  }

  // Byte offset of the slot holding the i-th record still in the ring.
  size_t SlotOffset(size_t i) const {
    const auto& h = ring_.header;
    uint64_t begin = h.write_index - ring_.records.size();
    return h.ring_offset + ((begin + i) % h.ring_capacity) * sizeof(xpu_record_v1);
  }
  std::string Mutated(const std::string& name, const std::string& bytes) {
    std::string p = dir_.path() + "/" + name;
    WriteBytes(p, bytes);
    return p;
  }

  TempDir dir_;
  std::string ring_path_, bytes_, base_json_;
  RingFile ring_;
  int64_t base_records_ = 0, base_corrupt_ = 0;
  std::vector<size_t> timed_;  // indices (ring order) of timed records
};

// The unmodified ring of a real run: every record the hook wrote is read,
// none is counted as corrupt.
TEST_F(RingDumpCorrupt, RealRingReadsClean) {
  EXPECT_EQ(base_records_, int64_t(ring_.records.size()));
  EXPECT_EQ(base_corrupt_, 0) << "records of the real ring rejected; flags in use: " << [&] {
    std::string f;
    for (const auto& r : ring_.records) f += std::to_string(r.flags) + " ";
    return f;
  }();
  EXPECT_EQ(ReaderCount(base_json_, "uncommitted"), 0);
  EXPECT_EQ(ReaderCount(base_json_, "lapped"), 0);
  EXPECT_EQ(ReaderCount(base_json_, "signatures"), int64_t(ring_.sigs.size()));
  EXPECT_EQ(ReaderCount(base_json_, "signatures_corrupt"), 0);
}

TEST_F(RingDumpCorrupt, RandomBytesAreRejected) {
  std::mt19937_64 rng(12345);
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{4095}, size_t{4096}, size_t{65536},
                      bytes_.size()}) {
    std::string b(size, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    RunResult r = Dump(Mutated("random", b));
    ExpectCleanExit(r, "random " + std::to_string(size));
    EXPECT_EQ(r.status, 1) << "random bytes accepted as a ring, size " << size;
  }
  // Random bytes behind a valid header: the header's layout no longer
  // matches nothing, but the sections are garbage.
  std::string b = bytes_;
  for (size_t i = XPU_RING_HEADER_SIZE; i < b.size(); ++i) b[i] = static_cast<char>(rng());
  ExpectCleanExit(Dump(Mutated("random_body", b)), "random body");
}

TEST_F(RingDumpCorrupt, TruncatedFilesAreRejected) {
  const auto& h = ring_.header;
  for (uint64_t size : {uint64_t{0}, uint64_t{8}, uint64_t{1023}, uint64_t{XPU_RING_HEADER_SIZE},
                        h.ring_offset + 100, h.sig_offset, h.sig_offset + 200, h.str_offset,
                        uint64_t(bytes_.size()) - 1}) {
    RunResult r = Dump(Mutated("truncated", bytes_.substr(0, size)));
    ExpectCleanExit(r, "truncated to " + std::to_string(size));
    EXPECT_EQ(r.status, 1) << "truncated ring accepted, size " << size;
  }
}

TEST_F(RingDumpCorrupt, BadHeaderFieldsAreRejected) {
  auto with = [&](size_t off, const void* v, size_t n) {
    std::string b = bytes_;
    memcpy(&b[off], v, n);
    return b;
  };
  const uint64_t bad_magic = XPU_RING_MAGIC ^ 1;
  const uint32_t bad_version = 99, not_pow2 = 1000, huge = 0x7fffffff;
  const uint64_t far = uint64_t(1) << 40;
  struct Case {
    const char* what;
    std::string bytes;
  };
  std::vector<Case> cases = {
      {"magic", with(offsetof(xpu_ring_header_v1, magic), &bad_magic, 8)},
      {"abi_version", with(offsetof(xpu_ring_header_v1, abi_version), &bad_version, 4)},
      {"ring_capacity", with(offsetof(xpu_ring_header_v1, ring_capacity), &not_pow2, 4)},
      {"sig_capacity", with(offsetof(xpu_ring_header_v1, sig_capacity), &huge, 4)},
      {"ring_offset", with(offsetof(xpu_ring_header_v1, ring_offset), &far, 8)},
      {"str_offset", with(offsetof(xpu_ring_header_v1, str_offset), &far, 8)},
      {"file_size", with(offsetof(xpu_ring_header_v1, file_size), &far, 8)},
  };
  for (const auto& c : cases) {
    RunResult r = Dump(Mutated("header", c.bytes));
    ExpectCleanExit(r, c.what);
    EXPECT_EQ(r.status, 1) << "bad " << c.what << " accepted";
  }
}

TEST_F(RingDumpCorrupt, FlippedRecordAndSignatureBitsAreCounted) {
  const int64_t n = base_records_;
  {  // A commit word that no longer matches its position: skipped, counted.
    std::string b = bytes_;
    b[SlotOffset(timed_[0]) + offsetof(xpu_record_v1, commit)] ^= 0x01;
    RunResult r = Dump(Mutated("commit", b));
    ExpectCleanExit(r, "commit");
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(ReaderCount(r.out, "records"), n - 1);
    EXPECT_EQ(ReaderCount(r.out, "uncommitted") + ReaderCount(r.out, "corrupt") +
                  ReaderCount(r.out, "lapped"),
              base_corrupt_ + 1);
  }
  {  // sig_id 0 and an id past the table: invalid records, counted.
    std::string b = bytes_;
    const uint32_t zero = 0, past = ring_.header.sig_capacity + 5;
    memcpy(&b[SlotOffset(timed_[1]) + offsetof(xpu_record_v1, sig_id)], &zero, 4);
    memcpy(&b[SlotOffset(timed_[2]) + offsetof(xpu_record_v1, sig_id)], &past, 4);
    RunResult r = Dump(Mutated("sig_id", b));
    ExpectCleanExit(r, "sig_id");
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(ReaderCount(r.out, "records"), n - 2);
    EXPECT_EQ(ReaderCount(r.out, "corrupt"), base_corrupt_ + 2);
  }
  {  // A signature whose commit no longer equals its index, and one with an
     // unknown kind: both rejected and counted.
    std::string b = bytes_;
    const auto& h = ring_.header;
    const uint32_t wrong = 3, bad_kind = 999;
    memcpy(&b[h.sig_offset + 1 * sizeof(xpu_signature_v1)], &wrong, 4);
    memcpy(&b[h.sig_offset + 2 * sizeof(xpu_signature_v1) + offsetof(xpu_signature_v1, kind)],
           &bad_kind, 2);
    RunResult r = Dump(Mutated("signature", b));
    ExpectCleanExit(r, "signature");
    EXPECT_EQ(r.status, 0);
    EXPECT_EQ(ReaderCount(r.out, "signatures"), int64_t(ring_.sigs.size() - 2));
    EXPECT_GE(ReaderCount(r.out, "signatures_corrupt"), 1);
  }
}

TEST_F(RingDumpCorrupt, RandomBitFlipsNeverCrash) {
  std::mt19937_64 rng(777);
  const int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    std::string b = bytes_;
    const int flips = 1 + static_cast<int>(rng() % 32);
    for (int f = 0; f < flips; ++f) {
      // Half the flips land in the header, where they hurt most.
      size_t off = (rng() & 1) ? rng() % XPU_RING_HEADER_SIZE : rng() % b.size();
      b[off] ^= static_cast<char>(1u << (rng() % 8));
    }
    for (const char* fmt : {"--json", "--csv", "--no-records"}) {
      std::string p = Mutated("flipped", b);
      RunResult r = xpu::e2e::Run({XPU_RING_DUMP_PATH, fmt, p}, {}, 30);
      ExpectCleanExit(r, "round " + std::to_string(round) + " " + fmt);
    }
  }
}

}  // namespace
}  // namespace xpu::e2e
