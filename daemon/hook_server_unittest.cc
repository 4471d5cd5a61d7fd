#include "daemon/hook_server.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/ring/testing/test_ring_writer.h"
#include "daemon/test_fakes.h"
#include "xpu/transport.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;
using testing::FakeHook;
using testing::WaitFor;

int CountOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class HookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xpu-hook-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    CollectorOptions co;
    co.table.history_records = 4096;
    co.liveness_interval_ns = ~0ull;  // the fake hook is this very process
    collector_ = std::make_unique<Collector>(co);
    StartServer();
    stop_drain_ = false;
    drain_ = std::thread([this] {
      while (!stop_drain_) {
        collector_->DrainOnce(MonotonicNs());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  void StartServer() {
    HookServerOptions o;
    o.socket.path = dir_ + "/sub/daemon.sock";
    o.socket.from_default_rules = true;
    o.ring.abandon_grace_ns = 1000000;
    server_ = std::make_unique<HookServer>(o, collector_.get());
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    stop_drain_ = true;
    drain_.join();
    server_.reset();
    collector_.reset();
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  uint64_t RecordsRead() { return collector_->stats().records_read; }

  std::string dir_;
  std::unique_ptr<Collector> collector_;
  std::unique_ptr<HookServer> server_;
  std::atomic<bool> stop_drain_{false};
  std::thread drain_;
};

TEST_F(HookServerTest, SocketAndDirectoryPermissions) {
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(lstat(server_->path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(HookServerTest, HelloRegistersRingAndRecordsWrittenAfterAreRead) {
  auto ring = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = ring->AddSignature(XPU_OP_KERNEL, "k");
  FakeHook hook(server_->path());
  ASSERT_TRUE(hook.connected());
  ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
  EXPECT_EQ(hook.ReadAck(), XPU_HELLO_OK);
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(ring->Write(TestRingWriter::MakeRecord(sig, i, 10, XPU_REC_TIMED)));
  EXPECT_TRUE(WaitFor([&] { return RecordsRead() == 100; })) << RecordsRead();
  EXPECT_EQ(server_->stats().registered, 1u);
  EXPECT_EQ(collector_->stats().processes_live, 1u);
}

TEST_F(HookServerTest, RecordsCommittedBeforeACrashAreStillRead) {
  auto ring = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = ring->AddSignature(XPU_OP_KERNEL, "k");
  {
    FakeHook hook(server_->path());
    ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
    ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
    stop_drain_ = true;  // nothing is drained before the "crash"
    drain_.join();
    for (int i = 0; i < 500; ++i)
      ring->Write(TestRingWriter::MakeRecord(sig, i, 10, XPU_REC_TIMED));
  }  // the connection closes: EOF
  EXPECT_TRUE(WaitFor([&] { return server_->stats().disconnected == 1; }));
  // The producer "died" mid-write too: one reserved slot is never committed.
  ring->ReserveWithoutCommit();
  stop_drain_ = false;
  drain_ = std::thread([this] {
    while (!stop_drain_) {
      collector_->DrainOnce(MonotonicNs());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  EXPECT_TRUE(WaitFor([&] { return collector_->stats().processes_live == 0; }));
  const CollectorStats st = collector_->stats();
  EXPECT_EQ(st.records_read, 500u);
  EXPECT_EQ(st.records_abandoned, 1u);
  EXPECT_EQ(st.processes, 1u);  // exited, kept for its history
}

TEST_F(HookServerTest, BadPeersGetErrorAcksAndTheDaemonSurvives) {
  const int fds_before = CountOpenFds();
  {
    FakeHook garbage(server_->path());
    const char junk[] = "hello? this is not a hello message at all";
    ASSERT_TRUE(garbage.Send(junk, sizeof(junk), {}));
    EXPECT_EQ(garbage.ReadAck(), XPU_HELLO_BAD_VERSION);
    EXPECT_TRUE(garbage.ClosedByPeer());
  }
  {
    FakeHook short_msg(server_->path());
    ASSERT_TRUE(short_msg.Send("x", 1, {}));
    EXPECT_EQ(short_msg.ReadAck(), XPU_HELLO_BAD_VERSION);
  }
  {
    FakeHook no_fd(server_->path());
    ASSERT_TRUE(no_fd.SendHello(-1, 4096));
    EXPECT_EQ(no_fd.ReadAck(), XPU_HELLO_BAD_RING);
  }
  {
    auto ring = TestRingWriter::Create(TestRingConfig{});
    FakeHook wrong_version(server_->path());
    ASSERT_TRUE(wrong_version.SendHello(ring->fd(), ring->size(), 99));
    EXPECT_EQ(wrong_version.ReadAck(), XPU_HELLO_BAD_VERSION);
  }
  {
    auto a = TestRingWriter::Create(TestRingConfig{});
    auto b = TestRingWriter::Create(TestRingConfig{});
    FakeHook two_fds(server_->path());
    xpu_hello_v1 h{};
    h.magic = XPU_HELLO_MAGIC;
    h.version = XPU_TRANSPORT_VERSION;
    h.abi_version = XPU_RECORD_ABI_VERSION;
    h.ring_file_size = a->size();
    ASSERT_TRUE(two_fds.Send(&h, sizeof(h), {a->fd(), b->fd()}));
    EXPECT_EQ(two_fds.ReadAck(), XPU_HELLO_BAD_RING);
  }
  {
    auto ring = TestRingWriter::Create(TestRingConfig{});
    FakeHook wrong_size(server_->path());
    ASSERT_TRUE(wrong_size.SendHello(ring->fd(), ring->size() + 4096));
    EXPECT_EQ(wrong_size.ReadAck(), XPU_HELLO_BAD_RING);
  }
  {
    auto ring = TestRingWriter::Create(TestRingConfig{});
    ring->header()->ring_capacity = 3;  // corrupt header
    FakeHook bad_ring(server_->path());
    ASSERT_TRUE(bad_ring.SendHello(ring->fd(), ring->size()));
    EXPECT_EQ(bad_ring.ReadAck(), XPU_HELLO_BAD_RING);
  }
  {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    FakeHook pipe_fd(server_->path());
    ASSERT_TRUE(pipe_fd.SendHello(p[0], 4096));
    EXPECT_EQ(pipe_fd.ReadAck(), XPU_HELLO_BAD_RING);
    close(p[0]);
    close(p[1]);
  }
  EXPECT_GE(server_->stats().bad_hello, 3u);
  EXPECT_GE(server_->stats().bad_ring, 5u);
  // Every fd the daemon received was closed again (same process here).
  EXPECT_TRUE(WaitFor([&] { return CountOpenFds() == fds_before; }))
      << CountOpenFds() << " vs " << fds_before;
  // And a good hook still registers.
  auto ring = TestRingWriter::Create(TestRingConfig{});
  FakeHook good(server_->path());
  ASSERT_TRUE(good.SendHello(ring->fd(), ring->size()));
  EXPECT_EQ(good.ReadAck(), XPU_HELLO_OK);
}

TEST_F(HookServerTest, HookThatShrinksItsRingAfterHelloCannotKillTheDaemon) {
  TestRingConfig cfg;
  cfg.sealable = false;  // memfd without MFD_ALLOW_SEALING: the daemon cannot seal it
  auto ring = TestRingWriter::Create(cfg);
  const uint32_t sig = ring->AddSignature(XPU_OP_KERNEL, "k");
  FakeHook hook(server_->path());
  ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
  ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
  ring->Write(TestRingWriter::MakeRecord(sig, 1, 1, 0));
  ASSERT_TRUE(WaitFor([&] { return RecordsRead() == 1; }));
  ASSERT_EQ(ftruncate(ring->fd(), 0), 0);
  // The drain thread keeps running over the shrunk mapping; the process is
  // closed although its socket is still open.
  EXPECT_TRUE(WaitFor([&] { return collector_->stats().processes_live == 0; }));
  auto other = TestRingWriter::Create(TestRingConfig{});
  FakeHook second(server_->path());
  ASSERT_TRUE(second.SendHello(other->fd(), other->size()));
  EXPECT_EQ(second.ReadAck(), XPU_HELLO_OK);
}

TEST_F(HookServerTest, SameProcessTwiceIsBusyTwoJobsStaySeparate) {
  TestRingConfig a_cfg;
  a_cfg.job = "job-a";
  TestRingConfig b_cfg;
  b_cfg.job = "job-b";  // same pid and start time, other job
  auto a = TestRingWriter::Create(a_cfg);
  auto a2 = TestRingWriter::Create(a_cfg);
  auto b = TestRingWriter::Create(b_cfg);
  FakeHook ha(server_->path()), ha2(server_->path()), hb(server_->path());
  ASSERT_TRUE(ha.SendHello(a->fd(), a->size()));
  EXPECT_EQ(ha.ReadAck(), XPU_HELLO_OK);
  ASSERT_TRUE(ha2.SendHello(a2->fd(), a2->size()));
  EXPECT_EQ(ha2.ReadAck(), XPU_HELLO_BUSY);
  ASSERT_TRUE(hb.SendHello(b->fd(), b->size()));
  EXPECT_EQ(hb.ReadAck(), XPU_HELLO_OK);
  EXPECT_EQ(collector_->stats().processes_live, 2u);
}

TEST_F(HookServerTest, SilentPeerIsDroppedAfterHelloTimeout) {
  server_.reset();
  HookServerOptions o;
  o.socket.path = dir_ + "/sub/daemon.sock";
  o.hello_timeout_ns = 50000000;  // 50 ms
  server_ = std::make_unique<HookServer>(o, collector_.get());
  ASSERT_TRUE(server_->Start().ok());
  FakeHook silent(server_->path());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.ClosedByPeer());
  EXPECT_EQ(server_->stats().hello_timeouts, 1u);
}

TEST(SocketPathTest, StaleSocketIsReplacedLiveOneIsNot) {
  char tmpl[] = "/tmp/xpu-sock-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/daemon.sock";
  {
    // A socket file nobody listens on.
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  SocketPath sp{path, false};
  auto first = ListeningSocket::Create(sp);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ListeningSocket::Create(sp);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  first->reset();
  struct stat st;
  EXPECT_NE(lstat(path.c_str(), &st), 0);  // removed on close
  // A regular file in the way is never removed.
  FILE* f = fopen(path.c_str(), "w");
  fclose(f);
  EXPECT_EQ(ListeningSocket::Create(sp).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(lstat(path.c_str(), &st), 0);
  std::string cmd = std::string("rm -rf ") + tmpl;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(SocketPathTest, ResolutionOrder) {
  unsetenv("XPU_DAEMON_SOCKET");
  setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
  EXPECT_EQ(ResolveSocketPath("/x/y.sock").path, "/x/y.sock");
  EXPECT_EQ(ResolveSocketPath("").path, "/run/user/1234/xpu/daemon.sock");
  EXPECT_TRUE(ResolveSocketPath("").from_default_rules);
  setenv("XPU_DAEMON_SOCKET", "/e/d.sock", 1);
  EXPECT_EQ(ResolveSocketPath("").path, "/e/d.sock");
  unsetenv("XPU_DAEMON_SOCKET");
  unsetenv("XDG_RUNTIME_DIR");
  const std::string expect = geteuid() == 0
                                 ? "/run/xpu/daemon.sock"
                                 : "/tmp/xpu-" + std::to_string(geteuid()) + "/daemon.sock";
  EXPECT_EQ(ResolveSocketPath("").path, expect);
}

}  // namespace
}  // namespace xpu::daemon
