// hook/ring/ring_writer_unittest.cc — RingWriter against a minimal reader.
// Thread-safety: the concurrency test runs 4 producers and 1 reader; the
// rest is single-threaded.
#include "hook/ring/ring_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hook/ring/ring_reader_for_test.h"

namespace xpu::hook {
namespace {

using testing::TestRingReader;

struct MemRing {
  explicit MemRing(uint32_t cap, uint32_t sigs = 16, uint64_t str = 4096)
      : layout(ComputeLayout(cap, sigs, str)) {
    mem.reset(static_cast<uint8_t*>(aligned_alloc(4096, layout.file_size)));
    memset(mem.get(), 0, layout.file_size);
    RingIdentity id;
    id.pid = 42;
    id.job = "job-1";
    id.host = "host-a";
    id.rank = 3;
    w.Adopt(mem.get(), layout, id);
  }
  struct Free {
    void operator()(uint8_t* p) const { free(p); }
  };
  RingLayout layout;
  std::unique_ptr<uint8_t, Free> mem;
  RingWriter w;
};

xpu_record_v1 Rec(uint32_t sig, uint32_t seq, uint16_t stream = 0) {
  xpu_record_v1 r{};
  r.commit = 0xdeadbeef;  // must be ignored
  r.sig_id = sig;
  r.start_ns = 1000 + seq;
  r.duration = 7;
  r.seq = seq;
  r.stream = stream;
  r.flags = XPU_REC_HOST;
  return r;
}

TEST(RingLayoutTest, SectionsArePageAlignedAndOrdered) {
  RingLayout l = ComputeLayout(1024, 100, 5000);
  EXPECT_EQ(l.ring_offset, XPU_RING_HEADER_SIZE);
  EXPECT_EQ(l.sig_offset % 4096, 0u);
  EXPECT_EQ(l.str_offset % 4096, 0u);
  EXPECT_GE(l.sig_offset, l.ring_offset + 1024 * 32);
  EXPECT_GE(l.str_offset, l.sig_offset + 100 * 128);
  EXPECT_EQ(l.str_capacity, 8192u);
  EXPECT_EQ(l.file_size, l.str_offset + l.str_capacity);
}

TEST(RingWriterTest, ZeroFileIsValidAndEmptyAndFormatFillsHeader) {
  RingLayout l = ComputeLayout(64, 16, 4096);
  std::vector<uint8_t> zero(l.file_size, 0);
  auto* h = reinterpret_cast<xpu_ring_header_v1*>(zero.data());
  auto* slots = reinterpret_cast<xpu_record_v1*>(zero.data() + l.ring_offset);
  h->ring_capacity = 64;  // a reader only needs the capacity to look
  TestRingReader r0(h, slots);
  xpu_record_v1 out;
  EXPECT_EQ(r0.Next(&out), TestRingReader::Result::kEmpty);

  MemRing m(64);
  xpu_ring_header_v1* mh = m.w.header();
  EXPECT_EQ(mh->magic, XPU_RING_MAGIC);
  EXPECT_EQ(mh->abi_version, XPU_RECORD_ABI_VERSION);
  EXPECT_EQ(mh->record_size, 32u);
  EXPECT_EQ(mh->signature_size, 128u);
  EXPECT_EQ(mh->ring_capacity, 64u);
  EXPECT_EQ(mh->file_size, m.layout.file_size);
  EXPECT_EQ(mh->pid, 42);
  EXPECT_EQ(mh->rank, 3);
  EXPECT_EQ(mh->device, -1);
  EXPECT_STREQ(mh->job, "job-1");
  EXPECT_STREQ(mh->host, "host-a");
  EXPECT_EQ(mh->producer_state, XPU_PRODUCER_ACTIVE);
  TestRingReader r(mh, m.w.slots());
  EXPECT_EQ(r.Next(&out), TestRingReader::Result::kEmpty);
}

TEST(RingWriterTest, RoundTrip) {
  MemRing m(64);
  for (uint32_t i = 1; i <= 10; ++i) ASSERT_TRUE(m.w.Write(Rec(i, i * 10, 3)));
  TestRingReader r(m.w.header(), m.w.slots());
  xpu_record_v1 out;
  for (uint32_t i = 1; i <= 10; ++i) {
    ASSERT_EQ(r.Next(&out), TestRingReader::Result::kRecord);
    EXPECT_EQ(out.commit, i);  // position + 1
    EXPECT_EQ(out.sig_id, i);
    EXPECT_EQ(out.seq, i * 10);
    EXPECT_EQ(out.start_ns, 1000u + i * 10);
    EXPECT_EQ(out.stream, 3);
    EXPECT_EQ(out.flags, XPU_REC_HOST);
  }
  EXPECT_EQ(r.Next(&out), TestRingReader::Result::kEmpty);
  EXPECT_EQ(m.w.Counter(XPU_CNT_RECORDS_WRITTEN), 10u);
}

TEST(RingWriterTest, FullRingDropsAndCounts) {
  MemRing m(16);
  int ok = 0;
  for (uint32_t i = 0; i < 20; ++i) ok += m.w.Write(Rec(1, i)) ? 1 : 0;
  EXPECT_EQ(ok, 16);
  EXPECT_EQ(m.w.Counter(XPU_CNT_DROPPED_FULL), 4u);
  TestRingReader r(m.w.header(), m.w.slots());
  xpu_record_v1 out;
  ASSERT_EQ(r.Next(&out), TestRingReader::Result::kRecord);
  EXPECT_EQ(out.seq, 0u);              // the oldest survive; new ones were dropped
  EXPECT_TRUE(m.w.Write(Rec(1, 99)));  // one slot freed
  EXPECT_FALSE(m.w.Write(Rec(1, 100)));
  EXPECT_EQ(m.w.Counter(XPU_CNT_DROPPED_FULL), 5u);
}

TEST(RingWriterTest, WrapAroundAndLapDetection) {
  MemRing m(16);
  TestRingReader r(m.w.header(), m.w.slots());
  xpu_record_v1 out;
  uint32_t next = 0;
  for (int lap = 0; lap < 3; ++lap) {
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(m.w.Write(Rec(1, next + i)));
    for (int i = 0; i < 16; ++i) {
      ASSERT_EQ(r.Next(&out), TestRingReader::Result::kRecord);
      EXPECT_EQ(out.seq, next + i);
      EXPECT_EQ(out.commit, next + i + 1);
    }
    next += 16;
  }
  EXPECT_EQ(m.w.Counter(XPU_CNT_DROPPED_FULL), 0u);
  // A stale cursor left at position 5 sees the slot rewritten two laps on.
  TestRingReader stale(m.w.header(), m.w.slots());
  stale.set_position(5);
  EXPECT_EQ(stale.Next(&out), TestRingReader::Result::kLapped);
}

TEST(RingWriterTest, ConcurrentProducersEveryRecordOnceOrDropped) {
  constexpr int kThreads = 4;
  constexpr uint32_t kPerThread = 100000;
  MemRing m(4096);
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  std::vector<uint32_t> ok_count(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (uint32_t i = 0; i < kPerThread; ++i) {
        if (m.w.Write(Rec(1, i, static_cast<uint16_t>(t)))) {
          ++ok_count[t];
        } else {
          std::this_thread::yield();  // let the reader catch up: exercise both paths
        }
      }
      done.fetch_add(1);
    });
  }
  std::vector<std::vector<uint8_t>> seen(kThreads, std::vector<uint8_t>(kPerThread, 0));
  TestRingReader r(m.w.header(), m.w.slots());
  uint64_t read = 0, dup = 0, bad = 0;
  xpu_record_v1 out;
  for (;;) {
    auto res = r.Next(&out);
    if (res == TestRingReader::Result::kRecord) {
      ++read;
      if (out.stream >= kThreads || out.seq >= kPerThread) {
        ++bad;
        continue;
      }
      if (seen[out.stream][out.seq]++ != 0) ++dup;
    } else if (res == TestRingReader::Result::kLapped) {
      ++bad;
      break;
    } else if (done.load() == kThreads && res == TestRingReader::Result::kEmpty) {
      break;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& p : producers) p.join();
  uint64_t produced_ok = 0;
  for (uint32_t c : ok_count) produced_ok += c;
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(dup, 0u);
  EXPECT_GT(read, 4u * 4096) << "the ring must have wrapped several times";
  printf("read %llu dropped %llu\n", static_cast<unsigned long long>(read),
         static_cast<unsigned long long>(m.w.Counter(XPU_CNT_DROPPED_FULL)));
  EXPECT_EQ(read, produced_ok);
  EXPECT_EQ(read + m.w.Counter(XPU_CNT_DROPPED_FULL), uint64_t{kThreads} * kPerThread);
  // Per producer, what was read is exactly what it managed to write.
  for (int t = 0; t < kThreads; ++t) {
    uint32_t n = 0;
    for (uint8_t s : seen[t]) n += s;
    EXPECT_EQ(n, ok_count[t]) << "producer " << t;
  }
}

TEST(RingWriterTest, StringArenaAppendsAndCountsWhenFull) {
  MemRing m(16, 16, 4096);
  uint32_t a = m.w.AppendString("hello", 5);
  uint32_t b = m.w.AppendString("world!", 6);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 5u);
  EXPECT_EQ(memcmp(m.w.arena() + b, "world!", 6), 0);
  EXPECT_EQ(m.w.header()->str_used, 11u);
  std::string big(5000, 'x');
  EXPECT_EQ(m.w.AppendString(big.data(), big.size()), UINT32_MAX);
  EXPECT_EQ(m.w.Counter(XPU_CNT_STR_ARENA_FULL), 1u);
  EXPECT_EQ(m.w.header()->str_used, 11u);
}

TEST(RingWriterTest, CreateMemfdAndDirectoryFile) {
  RingLayout l = ComputeLayout(64, 16, 4096);
  RingIdentity id;
  id.pid = 777000 + static_cast<int>(getpid() % 1000);
  std::string err;
  {
    RingWriter w;
    ASSERT_TRUE(w.Create(l, id, "", &err)) << err;
    struct stat st;
    ASSERT_EQ(fstat(w.fd(), &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), l.file_size);
    EXPECT_TRUE(w.Write(Rec(1, 1)));
  }
  char tmpl[] = "/tmp/xpu-ring-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  RingWriter w1, w2, w3;
  ASSERT_TRUE(w1.Create(l, id, dir, &err)) << err;
  EXPECT_TRUE(w1.Write(Rec(9, 9)));
  ASSERT_TRUE(w2.Create(l, id, dir, &err)) << err;  // same pid, w1 has data: a suffix
  EXPECT_EQ(w1.path(), dir + "/xpu-ring-" + std::to_string(id.pid) + ".bin");
  EXPECT_EQ(w2.path(), dir + "/xpu-ring-" + std::to_string(id.pid) + ".1.bin");
  EXPECT_TRUE(IsEmptyRingFile(w2.path(), id.pid));
  EXPECT_FALSE(IsEmptyRingFile(w1.path(), id.pid));
  EXPECT_FALSE(IsEmptyRingFile(w2.path(), id.pid + 1));
  // w2 never produced anything (an exec'ed-away image): its name is reused.
  ASSERT_TRUE(w3.Create(l, id, dir, &err)) << err;
  EXPECT_EQ(w3.path(), w2.path());
  EXPECT_FALSE(w1.RemoveFileIfUnused());  // holds a record: kept for post-mortem reading
  EXPECT_TRUE(w3.RemoveFileIfUnused());
  EXPECT_NE(access(w3.path().c_str(), F_OK), 0);
  // The file is readable by another mapping (a post-mortem tool).
  FILE* f = fopen(w1.path().c_str(), "rb");
  ASSERT_NE(f, nullptr);
  xpu_ring_header_v1 h;
  ASSERT_EQ(fread(&h, sizeof(h), 1, f), 1u);
  fclose(f);
  EXPECT_EQ(h.magic, XPU_RING_MAGIC);
  EXPECT_EQ(h.write_index, 1u);
  unlink(w1.path().c_str());
  unlink(w2.path().c_str());
  rmdir(dir.c_str());
}

TEST(RingWriterTest, MemfdIsSealedAgainstShrinkingBeforeHandOver) {
  RingLayout l = ComputeLayout(64, 16, 4096);
  RingIdentity id;
  id.pid = 4242;
  std::string err;
  RingWriter w;
  ASSERT_TRUE(w.Create(l, id, "", &err)) << err;
  EXPECT_TRUE(w.sealed());
  const int seals = fcntl(w.fd(), F_GET_SEALS);
  ASSERT_GE(seals, 0);
  EXPECT_TRUE(seals & F_SEAL_SHRINK);
  EXPECT_TRUE(seals & F_SEAL_SEAL);
  // Whoever holds the descriptor (the daemon, root through /proc/<pid>/fd)
  // cannot take pages away from the hook's mapping.
  EXPECT_NE(ftruncate(w.fd(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", w.fd());
  const int other = open(path, O_RDWR);
  ASSERT_GE(other, 0);
  EXPECT_NE(ftruncate(other, 0), 0);
  close(other);
  EXPECT_TRUE(w.Write(Rec(1, 1)));  // still writable
  EXPECT_EQ(w.Counter(XPU_CNT_RING_NOT_SEALED), 0u);
}

TEST(RingWriterTest, UnsafeRingDirectoryFallsBackToASealedMemfd) {
  RingLayout l = ComputeLayout(64, 16, 4096);
  RingIdentity id;
  id.pid = 4243;
  std::string err;
  char tmpl[] = "/tmp/xpu-ring-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  ASSERT_EQ(chmod(tmpl, 0777), 0);  // anyone could replace or truncate a file here
  RingWriter w;
  ASSERT_TRUE(w.Create(l, id, tmpl, &err)) << err;
  EXPECT_TRUE(w.path().empty());
  EXPECT_TRUE(w.sealed());
  EXPECT_NE(w.file_refused().find("writable by group or others"), std::string::npos);
  EXPECT_EQ(w.Counter(XPU_CNT_RING_FILE_REFUSED), 1u);
  rmdir(tmpl);
  RingWriter missing;
  ASSERT_TRUE(missing.Create(l, id, "/nonexistent-dir-xpu", &err)) << err;
  EXPECT_FALSE(missing.file_refused().empty());
  // A symlink to a private directory is refused too (lstat, no following).
  char real[] = "/tmp/xpu-ring-test-XXXXXX";
  ASSERT_NE(mkdtemp(real), nullptr);
  const std::string link = std::string(real) + ".lnk";
  ASSERT_EQ(symlink(real, link.c_str()), 0);
  RingWriter via_link;
  ASSERT_TRUE(via_link.Create(l, id, link, &err)) << err;
  EXPECT_TRUE(via_link.path().empty());
  unlink(link.c_str());
  rmdir(real);
}

}  // namespace
}  // namespace xpu::hook
