// hook/process/daemon_client_unittest.cc — the hook side of the transport.h
// handshake against an in-test listener, and the daemon auto-start election
// with a stand-in daemon script. Single-threaded: the test plays both ends.
#include "hook/process/daemon_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "hook/core_api.h"
#include "xpu/transport.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kSec = 1000000000ull;

class DaemonClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xpu-dc-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_path_ = dir_ + "/daemon.sock";
    RingIdentity id;
    id.pid = getpid();
    std::string err;
    ASSERT_TRUE(ring_.Create(ComputeLayout(64, 16, 4096), id, "", &err)) << err;
  }
  void TearDown() override {
    if (listen_fd_ >= 0) close(listen_fd_);
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }
  void Listen() {
    listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_GE(listen_fd_, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, socket_path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listen_fd_, 4), 0);
  }
  Config MakeConfig(bool autostart, const std::string& bin) {
    Config c;
    c.daemon = autostart;
    c.daemon_socket = socket_path_;
    c.daemon_bin = bin;
    return c;
  }
  // Accepts and reads the hello; returns the connection and the passed fd.
  int AcceptHello(xpu_hello_v1* hello, int* ring_fd) {
    int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return -1;
    iovec iov{hello, sizeof(*hello)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof(ctrl);
    ssize_t n = recvmsg(conn, &msg, 0);
    *ring_fd = -1;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (n == sizeof(*hello) && c != nullptr && c->cmsg_type == SCM_RIGHTS) {
      memcpy(ring_fd, CMSG_DATA(c), sizeof(int));
    }
    return conn;
  }

  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  RingWriter ring_;
};

TEST_F(DaemonClientTest, HandshakeSendsRingFdAndReconnectsAfterEof) {
  Listen();
  DaemonClient dc;
  dc.Init(&ring_, MakeConfig(false, ""));
  uint64_t now = 10 * kSec;
  dc.Tick(now);
  ASSERT_EQ(dc.state(), DaemonClient::State::kAwaitAck);
  xpu_hello_v1 hello{};
  int ring_fd = -1;
  int conn = AcceptHello(&hello, &ring_fd);
  ASSERT_GE(conn, 0);
  EXPECT_EQ(hello.magic, XPU_HELLO_MAGIC);
  EXPECT_EQ(hello.version, XPU_TRANSPORT_VERSION);
  EXPECT_EQ(hello.abi_version, XPU_RECORD_ABI_VERSION);
  EXPECT_EQ(hello.ring_file_size, ring_.file_size());
  EXPECT_EQ(hello.pid, getpid());
  ASSERT_GE(ring_fd, 0);
  struct stat st;
  ASSERT_EQ(fstat(ring_fd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), ring_.file_size());
  // The passed fd maps the same memory the producer writes.
  xpu_ring_header_v1 h;
  ASSERT_EQ(pread(ring_fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  EXPECT_EQ(h.magic, XPU_RING_MAGIC);
  close(ring_fd);

  dc.Tick(now + 1000);  // no ack yet
  EXPECT_EQ(dc.state(), DaemonClient::State::kAwaitAck);
  xpu_hello_ack_v1 ack{XPU_HELLO_MAGIC, XPU_HELLO_OK, 1};
  ASSERT_EQ(send(conn, &ack, sizeof(ack), 0), static_cast<ssize_t>(sizeof(ack)));
  dc.Tick(now + 2000);
  EXPECT_EQ(dc.state(), DaemonClient::State::kConnected);
  dc.Tick(now + 3000);
  EXPECT_EQ(dc.state(), DaemonClient::State::kConnected);
  close(conn);  // daemon went away
  uint64_t next = dc.Tick(now + 4000);
  EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
  // Backs off, briefly: a restarted daemon gets every rank back within ~1 s.
  EXPECT_GE(next, now + 4000 + kSec / 10);
  EXPECT_LE(next, now + 4000 + kSec);
  EXPECT_EQ(ring_.Counter(XPU_CNT_DAEMON_CONNECT_FAIL), 1u);
  dc.Tick(next);  // and hands the ring over again
  EXPECT_EQ(dc.state(), DaemonClient::State::kAwaitAck);
}

TEST_F(DaemonClientTest, RetriesWithoutADaemonAtLeastOnceASecond) {
  // Nothing listens on the socket path: every attempt fails at connect().
  DaemonClient dc;
  dc.Init(&ring_, MakeConfig(false, ""));
  uint64_t now = 10 * kSec;
  uint64_t gap = 0;
  for (int i = 0; i < 12; ++i) {
    const uint64_t next = dc.Tick(now);
    EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
    gap = next - now;
    EXPECT_LE(gap, kSec) << "attempt " << i;
    now = next;
  }
  EXPECT_EQ(gap, kSec);  // capped
  EXPECT_EQ(ring_.Counter(XPU_CNT_DAEMON_CONNECT_FAIL), 12u);
}

TEST_F(DaemonClientTest, ForkedChildDoesNotHoldTheConnection) {
  Listen();
  auto dc = std::make_unique<DaemonClient>();
  dc->Init(&ring_, MakeConfig(false, ""));
  dc->Tick(10 * kSec);
  xpu_hello_v1 hello{};
  int ring_fd = -1;
  int conn = AcceptHello(&hello, &ring_fd);
  ASSERT_GE(conn, 0);
  close(ring_fd);
  xpu_hello_ack_v1 ack{XPU_HELLO_MAGIC, XPU_HELLO_OK, 1};
  ASSERT_EQ(send(conn, &ack, sizeof(ack), 0), static_cast<ssize_t>(sizeof(ack)));
  dc->Tick(10 * kSec + 1);
  ASSERT_EQ(dc->state(), DaemonClient::State::kConnected);
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(go[1]);  // EOF on go[0] once the parent is gone, whatever happened
    alarm(30);     // and a hard bound on top
    dc->CloseInForkedChild();
    char c;
    (void)!read(go[0], &c, 1);  // live until the parent has checked
    _exit(0);
  }
  dc.reset();  // the parent process goes away (closes its socket)
  // The daemon must see EOF although the child is still alive.
  pollfd pfd{conn, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1);
  char buf[16];
  EXPECT_EQ(recv(conn, buf, sizeof(buf), MSG_DONTWAIT), 0);
  (void)!write(go[1], "x", 1);
  int status = 0;
  waitpid(child, &status, 0);
  close(go[0]);
  close(go[1]);
  close(conn);
}

TEST_F(DaemonClientTest, AckTimeoutAndDeniedBackOff) {
  Listen();
  DaemonClient dc;
  dc.Init(&ring_, MakeConfig(false, ""));
  uint64_t now = 10 * kSec;
  dc.Tick(now);
  ASSERT_EQ(dc.state(), DaemonClient::State::kAwaitAck);
  uint64_t next = dc.Tick(now + 3 * kSec);  // past the 2 s ack timeout
  EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
  EXPECT_EQ(ring_.Counter(XPU_CNT_DAEMON_CONNECT_FAIL), 1u);
  dc.Tick(next);
  ASSERT_EQ(dc.state(), DaemonClient::State::kAwaitAck);
  // Drain the two pending connections; answer the newest with DENIED.
  xpu_hello_v1 hello{};
  int fd1 = -1, fd2 = -1;
  int c1 = AcceptHello(&hello, &fd1);
  int c2 = AcceptHello(&hello, &fd2);
  ASSERT_GE(c2, 0);
  xpu_hello_ack_v1 ack{XPU_HELLO_MAGIC, XPU_HELLO_DENIED, 1};
  ASSERT_EQ(send(c2, &ack, sizeof(ack), 0), static_cast<ssize_t>(sizeof(ack)));
  uint64_t after_denied = dc.Tick(next + 1000);
  EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
  EXPECT_GE(after_denied, next + 1000 + 30 * kSec);  // slowest pace
  close(c1);
  close(c2);
  close(fd1);
  close(fd2);
}

TEST_F(DaemonClientTest, NoDaemonNoAutostartJustCounts) {
  DaemonClient dc;
  dc.Init(&ring_, MakeConfig(false, ""));
  dc.Tick(10 * kSec);
  EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
  EXPECT_EQ(dc.spawned_pid(), 0);
  EXPECT_EQ(ring_.Counter(XPU_CNT_DAEMON_CONNECT_FAIL), 1u);
  struct stat st;
  EXPECT_NE(stat((dir_ + "/daemon.lock").c_str(), &st), 0);  // no election without autostart
}

TEST_F(DaemonClientTest, AutostartSpawnsOneDetachedDaemonWithoutPreload) {
  std::string script = dir_ + "/fake-daemon.sh";
  std::string out = dir_ + "/spawned.txt";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho \"$@\" > '" << out << ".tmp'\necho \"preload=$LD_PRELOAD\" >> '" << out
      << ".tmp'\nps -o sid= -p $$ >> '" << out << ".tmp'\nmv '" << out << ".tmp' '" << out << "'\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  setenv("LD_PRELOAD", "", 1);  // must be stripped even when set
  DaemonClient dc;
  Config c = MakeConfig(true, script);
  c.engine = "10.1.2.3:7441";
  dc.Init(&ring_, c);
  dc.Tick(10 * kSec);
  EXPECT_GT(dc.spawned_pid(), 0);
  // A second process (another lock holder) loses the election.
  int other = open((dir_ + "/daemon.lock").c_str(), O_RDWR);
  ASSERT_GE(other, 0);
  EXPECT_NE(flock(other, LOCK_EX | LOCK_NB), 0);
  close(other);
  pid_t child = dc.spawned_pid();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // bounded: the script exits at once
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  EXPECT_NE(text.find("--socket " + socket_path_ + " --idle-exit-s "), std::string::npos) << text;
  EXPECT_NE(text.find(" --engine 10.1.2.3:7441\n"), std::string::npos) << text;
  EXPECT_NE(text.find("preload=\n"), std::string::npos) << text;
  // Own session: its session id (third line, from ps) is its own pid.
  std::istringstream lines(text);
  std::string l1, l2, sid;
  std::getline(lines, l1);
  std::getline(lines, l2);
  lines >> sid;
  if (system("command -v ps > /dev/null 2>&1") == 0) {
    EXPECT_EQ(sid, std::to_string(child)) << text;
  }
  unsetenv("LD_PRELOAD");
}

TEST_F(DaemonClientTest, MissingBinaryKeepsGoing) {
  DaemonClient dc;
  dc.Init(&ring_, MakeConfig(true, dir_ + "/does-not-exist"));
  dc.Tick(10 * kSec);
  EXPECT_EQ(dc.spawned_pid(), 0);
  EXPECT_EQ(dc.state(), DaemonClient::State::kIdle);
  EXPECT_GE(ring_.Counter(XPU_CNT_DAEMON_CONNECT_FAIL), 1u);
  EXPECT_EQ(DaemonClient::FindDaemonBinary(dir_ + "/does-not-exist"), "");
}

}  // namespace
}  // namespace xpu::hook
