// hook/ring/ring_fault_guard_unittest.cc — a ring file truncated under the
// writer costs records, never the process; other SIGBUS keep their old fate.
// Single-threaded except where a test says otherwise; the death tests run in
// a fresh process each (gtest's "threadsafe" style), so the handler is
// installed there after their own set-up.
#include "hook/ring/ring_fault_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hook/ring/ring_writer.h"

namespace xpu::hook {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/xpu-guard-test-XXXXXX";
    path_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  void Own(const std::string& f) { files_.push_back(f); }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

xpu_record_v1 Rec(uint32_t seq) {
  xpu_record_v1 r{};
  r.sig_id = 1;
  r.start_ns = 1000 + seq;
  r.duration = 7;
  r.seq = seq;
  r.flags = XPU_REC_HOST;
  return r;
}

RingIdentity Id(int pid) {
  RingIdentity id;
  id.pid = pid;
  id.job = "job-guard";
  id.host = "host-a";
  id.rank = 0;
  return id;
}

// What another process (the daemon, a post-mortem tool) sees in the file.
bool ReadFileHeader(const std::string& path, xpu_ring_header_v1* h) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = pread(fd, h, sizeof(*h), 0) == static_cast<ssize_t>(sizeof(*h));
  close(fd);
  return ok;
}

void TruncateFile(const std::string& path, off_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, size), 0);
  close(fd);
}

TEST(RingFaultGuardTest, TruncatedBelowTheSlotsTheHeaderKeepsCounting) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const RingLayout l = ComputeLayout(64, 16, 4096);
  std::string err;
  RingWriter w;
  ASSERT_TRUE(w.Create(l, Id(91001), dir.path(), &err)) << err;
  dir.Own(w.path());
  EXPECT_TRUE(w.guarded());
  for (uint32_t i = 0; i < 10; ++i) ASSERT_TRUE(w.Write(Rec(i)));
  const uint64_t answered = RingFaultsAnswered();
  // Everything but the header page goes: the next record's slot is past
  // the end of the file.
  TruncateFile(w.path(), XPU_RING_HEADER_SIZE);
  // Keep the ring from filling: consume the positions as a daemon would.
  for (uint32_t i = 10; i < 200; ++i) {
    ASSERT_TRUE(w.Write(Rec(i)));
    __atomic_store_n(&w.header()->read_index, __atomic_load_n(&w.header()->write_index,
                                                              __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
  }
  // One signal for the whole truncation, not one per page.
  EXPECT_EQ(RingFaultsAnswered(), answered + 1);
  EXPECT_EQ(w.Counter(XPU_CNT_RING_TRUNCATED), 1u);
  // Signatures and names (past the end too) still work, privately.
  xpu_signature_v1 sig{};
  sig.kind = 1;
  w.PublishSignature(2, sig);
  EXPECT_NE(w.AppendString("name", 4), UINT32_MAX);
  // The header is still the file's: another process sees the hook's indices
  // and counters go on, so it can count what it cannot read.
  xpu_ring_header_v1 h;
  ASSERT_TRUE(ReadFileHeader(w.path(), &h));
  EXPECT_EQ(h.magic, XPU_RING_MAGIC);
  EXPECT_EQ(h.write_index, 200u);
  EXPECT_EQ(h.counters[XPU_CNT_RECORDS_WRITTEN], 200u);
  EXPECT_EQ(h.counters[XPU_CNT_RING_TRUNCATED], 1u);
  struct stat st;
  ASSERT_EQ(stat(w.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(XPU_RING_HEADER_SIZE));  // never grown back
}

TEST(RingFaultGuardTest, TruncatedToZeroTheWriterGoesOnPrivately) {
  TempDir dir;
  const RingLayout l = ComputeLayout(64, 16, 4096);
  std::string err;
  RingWriter w;
  ASSERT_TRUE(w.Create(l, Id(91002), dir.path(), &err)) << err;
  dir.Own(w.path());
  ASSERT_TRUE(w.Write(Rec(0)));
  TruncateFile(w.path(), 0);
  // The header page is gone with the rest: the writer keeps going in
  // private memory (its ring fills and counts drops nobody reads).
  uint64_t ok = 0;
  for (uint32_t i = 1; i < 500; ++i) ok += w.Write(Rec(i)) ? 1 : 0;
  EXPECT_EQ(ok, 64u);
  w.SetHeartbeat(5);
  EXPECT_EQ(w.Counter(XPU_CNT_DROPPED_FULL), 499u - 64u);
  // Truncated again, and grown: the anonymous pages stay (what the hook
  // wrote there is not clobbered by a second replacement).
  TruncateFile(w.path(), 0);
  TruncateFile(w.path(), static_cast<off_t>(l.file_size));
  EXPECT_EQ(w.Counter(XPU_CNT_DROPPED_FULL), 499u - 64u);
  EXPECT_FALSE(w.Write(Rec(999)));
}

TEST(RingFaultGuardTest, ManyThreadsFaultingAtOnceAllSurvive) {
  TempDir dir;
  const RingLayout l = ComputeLayout(4096, 16, 4096);
  std::string err;
  RingWriter w;
  ASSERT_TRUE(w.Create(l, Id(91003), dir.path(), &err)) << err;
  dir.Own(w.path());
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) {
      }
      for (uint32_t i = 0; i < 1000; ++i) w.Write(Rec(i));
    });
  }
  TruncateFile(w.path(), XPU_RING_HEADER_SIZE);
  go.store(true);
  for (auto& t : threads) t.join();
  xpu_ring_header_v1 h;
  ASSERT_TRUE(ReadFileHeader(w.path(), &h));
  EXPECT_EQ(h.counters[XPU_CNT_RECORDS_WRITTEN] + h.counters[XPU_CNT_DROPPED_FULL], 4000u);
  EXPECT_GE(h.counters[XPU_CNT_RING_TRUNCATED], 1u);
}

// Another mapping of a file that shrinks: a SIGBUS the guard must not
// swallow.
void TouchTruncatedMapping() {
  char tmpl[] = "/tmp/xpu-guard-other-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) _exit(3);
  unlink(tmpl);
  if (ftruncate(fd, 8192) != 0) _exit(4);
  auto* p = static_cast<volatile char*>(
      mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  if (p == MAP_FAILED) _exit(5);
  if (ftruncate(fd, 0) != 0) _exit(6);
  p[4096] = 1;  // SIGBUS
}

void GuardSomeRing(TempDir* dir, RingWriter* w) {
  std::string err;
  if (!w->Create(ComputeLayout(64, 16, 4096), Id(91004), dir->path(), &err) || !w->guarded())
    _exit(7);
  dir->Own(w->path());
}

void RecordingHandler(int, siginfo_t* info, void*) {
  // The previous handler gets the fault with its address, and may end it.
  _exit(info != nullptr && info->si_code > 0 ? 42 : 43);
}

TEST(RingFaultGuardDeathTest, OtherFaultsReachThePreviousHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = RecordingHandler;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGBUS, &sa, nullptr);
        TempDir dir;
        RingWriter w;
        GuardSomeRing(&dir, &w);
        TouchTruncatedMapping();
        _exit(0);
      },
      testing::ExitedWithCode(42), "");
}

TEST(RingFaultGuardDeathTest, OtherFaultsStillKillWithTheDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGBUS, SIG_DFL);
        TempDir dir;
        RingWriter w;
        GuardSomeRing(&dir, &w);
        TouchTruncatedMapping();
        _exit(0);
      },
      testing::KilledBySignal(SIGBUS), "");
}

TEST(RingFaultGuardDeathTest, ASigbusSentByKillStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGBUS, SIG_DFL);
        TempDir dir;
        RingWriter w;
        GuardSomeRing(&dir, &w);
        kill(getpid(), SIGBUS);
        _exit(0);
      },
      testing::KilledBySignal(SIGBUS), "");
}

// Like Python's faulthandler: installed after ours, it reports the fault,
// gives the signal back to the handler it found (ours) and raises it again.
struct sigaction g_found;
void ReportingThenRaising(int sig, siginfo_t*, void*) {
  static const char kMsg[] = "Fatal Python error: Bus error\n";
  (void)!write(2, kMsg, sizeof(kMsg) - 1);
  sigaction(sig, &g_found, nullptr);
  raise(sig);
}

TEST(RingFaultGuardDeathTest, AFaultReRaisedByALaterHandlerIsStillAnswered) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TempDir dir;
        RingWriter w;
        GuardSomeRing(&dir, &w);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = ReportingThenRaising;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGBUS, &sa, &g_found);
        TruncateFile(w.path(), 0);
        for (uint32_t i = 0; i < 10; ++i) w.Write(Rec(i));
        _exit(RingFaultsAnswered() == 1 && w.Counter(XPU_CNT_RING_TRUNCATED) == 1 ? 0 : 9);
      },
      testing::ExitedWithCode(0), "Bus error");
}

}  // namespace
}  // namespace xpu::hook
