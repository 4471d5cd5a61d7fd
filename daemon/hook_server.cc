#include "daemon/hook_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "xpu/transport.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("hook_server");
  return logger;
}

constexpr int kMaxFdsPerMessage = 16;

}  // namespace

struct HookServer::Connection {
  int fd = -1;
  PeerInfo peer;
  uint64_t accepted_at_ns = 0;
  bool registered = false;
  uint64_t key = 0;
  ~Connection() {
    if (fd >= 0) close(fd);
  }
};

HookServer::HookServer(const HookServerOptions& options, Collector* collector)
    : options_(options), collector_(collector) {}

HookServer::~HookServer() { Stop(); }

absl::Status HookServer::Start() {
  auto ls = ListeningSocket::Create(options_.socket);
  if (!ls.ok()) return ls.status();
  listener_ = std::move(*ls);
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return absl::InternalError("pipe2 failed");
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  Log()->info("listening on {}", listener_->path());
  return absl::OkStatus();
}

void HookServer::Stop() {
  if (!running_.exchange(false)) return;
  const char b = 1;
  (void)!write(wake_pipe_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  conns_.clear();
  listener_.reset();
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
  wake_pipe_[0] = wake_pipe_[1] = -1;
}

HookServerStats HookServer::stats() const {
  HookServerStats s;
  s.accepted = stats_.accepted;
  s.registered = stats_.registered;
  s.denied_uid = stats_.denied_uid;
  s.bad_hello = stats_.bad_hello;
  s.bad_ring = stats_.bad_ring;
  s.busy = stats_.busy;
  s.disconnected = stats_.disconnected;
  s.ctl_messages = stats_.ctl_messages;
  s.hello_timeouts = stats_.hello_timeouts;
  return s;
}

void HookServer::SendAck(int fd, uint32_t status) {
  xpu_hello_ack_v1 ack{};
  ack.magic = XPU_HELLO_MAGIC;
  ack.status = status;
  ack.daemon_pid = static_cast<uint32_t>(getpid());
  // Non-blocking: a peer that does not read its ack must not stall the loop.
  (void)send(fd, &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void HookServer::Accept() {
  for (;;) {
    const int fd = accept4(listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        Log()->warn("accept: {}", strerror(errno));
      return;
    }
    ++stats_.accepted;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    const bool root = geteuid() == 0;
    if (!root && !options_.allow_any_uid && cred.uid != geteuid()) {
      ++stats_.denied_uid;
      uint64_t suppressed = 0;
      if (warn_limiter_.Allow(MonotonicNs(), &suppressed)) {
        Log()->warn("refusing pid {} of uid {} (daemon uid {}; {} similar suppressed)", cred.pid,
                    cred.uid, geteuid(), suppressed);
      }
      SendAck(fd, XPU_HELLO_DENIED);
      close(fd);
      continue;
    }
    if (conns_.size() >= options_.max_connections) {
      ++stats_.busy;
      SendAck(fd, XPU_HELLO_BUSY);
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer.pid = cred.pid;
    c->peer.uid = cred.uid;
    c->peer.gid = cred.gid;
    c->accepted_at_ns = MonotonicNs();
    conns_.push_back(std::move(c));
  }
}

bool HookServer::HandleHello(Connection& c) {
  xpu_hello_v1 hello{};
  // One byte more than a hello: a longer message shows up as MSG_TRUNC.
  alignas(8) uint8_t buf[sizeof(hello) + 1];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  iovec iov{buf, sizeof(buf)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(c.fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0) return false;  // closed before saying hello
  std::vector<int> fds;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
      continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  struct FdCloser {
    std::vector<int>* fds;
    ~FdCloser() {
      for (int fd : *fds) close(fd);
    }
  } closer{&fds};  // the reader keeps its own mapping; no fd outlives this call

  auto reject = [&](uint32_t status, const char* why) {
    if (status == XPU_HELLO_BAD_RING) {
      ++stats_.bad_ring;
    } else {
      ++stats_.bad_hello;
    }
    uint64_t suppressed = 0;
    if (warn_limiter_.Allow(MonotonicNs(), &suppressed)) {
      Log()->warn("hello from pid {} rejected: {} ({} similar messages suppressed)", c.peer.pid,
                  why, suppressed);
    }
    SendAck(c.fd, status);
    return false;
  };
  if (n != static_cast<ssize_t>(sizeof(hello)) || (msg.msg_flags & MSG_TRUNC)) {
    return reject(XPU_HELLO_BAD_VERSION, "message is not an xpu_hello_v1");
  }
  memcpy(&hello, buf, sizeof(hello));
  if (hello.magic != XPU_HELLO_MAGIC) return reject(XPU_HELLO_BAD_VERSION, "bad magic");
  if (hello.version != XPU_TRANSPORT_VERSION)
    return reject(XPU_HELLO_BAD_VERSION, "unsupported transport version");
  if (hello.abi_version != XPU_RECORD_ABI_VERSION)
    return reject(XPU_HELLO_BAD_VERSION, "unsupported record ABI");
  if (msg.msg_flags & MSG_CTRUNC) return reject(XPU_HELLO_BAD_RING, "ancillary data truncated");
  if (fds.size() != 1) return reject(XPU_HELLO_BAD_RING, "expected exactly one fd");
  struct stat st;
  if (fstat(fds[0], &st) != 0 || !S_ISREG(st.st_mode))
    return reject(XPU_HELLO_BAD_RING, "fd is not a memfd/file");
  if (static_cast<uint64_t>(st.st_size) != hello.ring_file_size) {
    return reject(XPU_HELLO_BAD_RING, "ring_file_size does not match the fd");
  }
  auto reader = ring::RingReader::FromFd(fds[0], options_.ring);
  if (!reader.ok()) {
    Log()->warn("ring of pid {}: {}", c.peer.pid, reader.status().ToString());
    return reject(XPU_HELLO_BAD_RING, "ring validation failed");
  }
  if (!(*reader)->shrink_sealed()) {
    // Needs MFD_ALLOW_SEALING on the hook's memfd (or is a ring file on disk).
    Log()->info("ring of pid {} could not be sealed against shrinking", c.peer.pid);
  }
  c.peer.start_ticks = ReadProcStartTicks(c.peer.pid);
  auto key = collector_->AddRing(std::move(*reader), c.peer, MonotonicNs());
  if (!key.ok()) {
    ++stats_.busy;
    Log()->warn("ring of pid {} not registered: {}", c.peer.pid, key.status().ToString());
    SendAck(c.fd, XPU_HELLO_BUSY);
    return false;
  }
  c.registered = true;
  c.key = *key;
  ++stats_.registered;
  SendAck(c.fd, XPU_HELLO_OK);
  return true;
}

bool HookServer::OnReadable(Connection& c) {
  if (!c.registered) return HandleHello(c);
  // After the hello: reserved control messages. Read, count, close stray fds.
  for (;;) {
    uint8_t buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    iovec iov{buf, sizeof(buf)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(c.fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0) return false;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
        continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        close(fd);
      }
    }
    ++stats_.ctl_messages;
  }
}

void HookServer::Run() {
  std::vector<pollfd> pfds;
  while (running_) {
    pfds.clear();
    pfds.push_back({wake_pipe_[0], POLLIN, 0});
    pfds.push_back({listener_->fd(), POLLIN, 0});
    for (const auto& c : conns_) pfds.push_back({c->fd, POLLIN, 0});
    const int rc = poll(pfds.data(), pfds.size(), 200);
    if (rc < 0 && errno != EINTR) {
      Log()->error("poll: {}", strerror(errno));
      break;
    }
    if (!running_) break;
    const uint64_t now = MonotonicNs();
    // Connections first (indices match pfds[2..]); accept afterwards so the
    // vector does not move under the loop.
    std::vector<std::unique_ptr<Connection>> keep;
    keep.reserve(conns_.size());
    for (size_t i = 0; i < conns_.size(); ++i) {
      Connection& c = *conns_[i];
      const short re = rc > 0 ? pfds[i + 2].revents : 0;
      bool alive = true;
      if (re & POLLIN) alive = OnReadable(c);
      if (alive && (re & (POLLHUP | POLLERR | POLLNVAL)) && !(re & POLLIN)) alive = false;
      if (alive && !c.registered && now - c.accepted_at_ns >= options_.hello_timeout_ns) {
        ++stats_.hello_timeouts;
        alive = false;
      }
      if (alive) {
        keep.push_back(std::move(conns_[i]));
        continue;
      }
      if (c.registered) {
        ++stats_.disconnected;
        collector_->MarkDisconnected(c.key, now);
      }
    }
    conns_.swap(keep);
    if (rc > 0 && (pfds[1].revents & POLLIN)) Accept();
  }
}

}  // namespace xpu::daemon
