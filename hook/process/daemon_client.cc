// hook/process/daemon_client.cc — see daemon_client.h. Background thread only.
#include "hook/process/daemon_client.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "hook/core_api.h"
#include "xpu/transport.h"

extern char** environ;

namespace xpu::hook {
namespace {

constexpr uint64_t kSec = 1000000000ull;
// Refusals (DENIED, BAD_*) do not change soon: the slowest pace. Anything
// else (no daemon yet, a daemon restarting) is retried quickly and at least
// once a second, so that every rank reattaches within ~1 s of a new daemon
// listening; a connect() on a Unix socket costs microseconds, off the
// launch path.
constexpr uint64_t kMaxBackoffNs = 30 * kSec;
constexpr uint64_t kFirstRetryNs = 100 * 1000 * 1000;
constexpr uint64_t kMaxRetryNs = kSec;
constexpr uint64_t kAckTimeoutNs = 2 * kSec;

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool Executable(const std::string& p) { return !p.empty() && access(p.c_str(), X_OK) == 0; }

}  // namespace

DaemonClient::~DaemonClient() {
  CloseSocket();
  if (int fd = __atomic_exchange_n(&lock_fd_, -1, __ATOMIC_SEQ_CST); fd >= 0) close(fd);
}

void DaemonClient::Init(RingWriter* ring, const Config& config) {
  ring_ = ring;
  socket_path_ = config.daemon_socket;
  daemon_bin_ = config.daemon_bin;
  engine_ = config.engine;
  idle_exit_s_ = std::to_string(config.daemon_idle_exit_s);
  autostart_ = config.daemon;
  log_level_ = config.log_level;
  rank_ = config.rank;
}

void DaemonClient::Note(const std::string& line) {
  // Background thread only: one write(2), once per process; rank 0 (or a
  // process without RANK) speaks for the job unless XPU_LOG=info.
  if (noted_ || log_level_ == 0 || (log_level_ < 2 && rank_ > 0)) return;
  noted_ = true;
  std::string out = "xputimer: " + line + "\n";
  ssize_t n = write(2, out.data(), out.size());
  (void)n;
}

std::string DaemonClient::FindDaemonBinary(const std::string& configured) {
  if (!configured.empty()) return Executable(configured) ? configured : "";
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&DaemonClient::FindDaemonBinary), &info) != 0 &&
      info.dli_fname != nullptr && strchr(info.dli_fname, '/') != nullptr) {
    std::string dir = DirName(info.dli_fname);
    if (Executable(dir + "/xpu-daemon")) return dir + "/xpu-daemon";
    if (Executable(dir + "/../bin/xpu-daemon")) return dir + "/../bin/xpu-daemon";
    // Build tree: build/hook/libxpu_hook.so, build/daemon/xpu-daemon.
    if (Executable(dir + "/../daemon/xpu-daemon")) return dir + "/../daemon/xpu-daemon";
  }
  if (const char* path = getenv("PATH")) {
    std::string all(path);
    size_t start = 0;
    while (start <= all.size()) {
      size_t end = all.find(':', start);
      if (end == std::string::npos) end = all.size();
      std::string cand = all.substr(start, end - start) + "/xpu-daemon";
      if (end > start && Executable(cand)) return cand;
      start = end + 1;
    }
  }
  return "";
}

void DaemonClient::CloseSocket() {
  int fd = __atomic_exchange_n(&sock_, -1, __ATOMIC_SEQ_CST);
  if (fd >= 0) close(fd);
}

void DaemonClient::CloseInForkedChild() {
  int fd = __atomic_exchange_n(&sock_, -1, __ATOMIC_SEQ_CST);
  if (fd >= 0) close(fd);
  fd = __atomic_exchange_n(&lock_fd_, -1, __ATOMIC_SEQ_CST);
  if (fd >= 0) close(fd);
  state_ = State::kIdle;
}

void DaemonClient::Fail(uint64_t now, uint64_t min_backoff_ns) {
  CloseSocket();
  state_ = State::kIdle;
  ring_->Count(XPU_CNT_DAEMON_CONNECT_FAIL);
  backoff_ns_ = backoff_ns_ == 0 ? kFirstRetryNs : std::min(backoff_ns_ * 2, kMaxRetryNs);
  if (backoff_ns_ < min_backoff_ns) backoff_ns_ = min_backoff_ns;
  next_attempt_ns_ = now + backoff_ns_;
}

bool DaemonClient::Connect(uint64_t now) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.empty() || socket_path_.size() >= sizeof(addr.sun_path)) {
    Fail(now, kMaxBackoffNs);
    return false;
  }
  memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  __atomic_store_n(&sock_, socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0),
                   __ATOMIC_SEQ_CST);
  if (sock_ < 0) {
    Fail(now, 0);
    return false;
  }
  if (connect(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    Fail(now, 0);
    if (err == ENOENT || err == ECONNREFUSED) MaybeSpawnDaemon(now);
    if (!autostart_) {
      Note("no xpu-daemon at " + socket_path_ + " (" + strerror(err) +
           ") and XPU_DAEMON=off: this process is not traced to the engine until one starts");
    }
    return false;
  }
  xpu_hello_v1 hello{};
  hello.magic = XPU_HELLO_MAGIC;
  hello.version = XPU_TRANSPORT_VERSION;
  hello.abi_version = XPU_RECORD_ABI_VERSION;
  hello.ring_file_size = ring_->file_size();
  hello.pid = getpid();
  iovec iov{&hello, sizeof(hello)};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  int fd = ring_->fd();
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(sock_, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello))) {
    Fail(now, 0);
    return false;
  }
  state_ = State::kAwaitAck;
  ack_deadline_ns_ = now + kAckTimeoutNs;
  return true;
}

uint64_t DaemonClient::Tick(uint64_t now) {
  if (spawned_ > 0 && waitpid(spawned_, nullptr, WNOHANG) == spawned_) spawned_ = 0;  // reap
  switch (state_) {
    case State::kIdle:
      if (ring_ == nullptr || ring_->fd() < 0) return now + kMaxBackoffNs;  // nothing to hand over
      if (now < next_attempt_ns_) return next_attempt_ns_;
      if (!Connect(now)) return next_attempt_ns_;
      return now + 10 * 1000 * 1000;
    case State::kAwaitAck: {
      xpu_hello_ack_v1 ack{};
      ssize_t n = recv(sock_, &ack, sizeof(ack), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (now >= ack_deadline_ns_) {
          Fail(now, 0);
          return next_attempt_ns_;
        }
        return now + 10 * 1000 * 1000;
      }
      if (n != static_cast<ssize_t>(sizeof(ack)) || ack.magic != XPU_HELLO_MAGIC ||
          ack.status != XPU_HELLO_OK) {
        // DENIED / BAD_* will not change soon: retry at the slowest pace.
        bool busy = n == static_cast<ssize_t>(sizeof(ack)) && ack.status == XPU_HELLO_BUSY;
        Fail(now, busy ? 0 : kMaxBackoffNs);
        return next_attempt_ns_;
      }
      state_ = State::kConnected;
      backoff_ns_ = 0;
      // A daemon serves us: the election is over.
      if (int fd = __atomic_exchange_n(&lock_fd_, -1, __ATOMIC_SEQ_CST); fd >= 0) close(fd);
      return now + 100 * 1000 * 1000;
    }
    case State::kConnected: {
      // Control messages are reserved; read and drop them, watch for EOF.
      char buf[256];
      for (;;) {
        ssize_t n = recv(sock_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          // Daemon restarted or died: hand the ring over again.
          Fail(now, 0);
          return next_attempt_ns_;
        }
        break;
      }
      return now + 100 * 1000 * 1000;
    }
  }
  return now + kSec;
}

void DaemonClient::MaybeSpawnDaemon(uint64_t now) {
  if (!autostart_ || now < next_spawn_ns_ || spawned_ > 0) return;
  next_spawn_ns_ = now + kMaxBackoffNs;
  std::string dir = DirName(socket_path_);
  mkdir(dir.c_str(), 0700);  // EEXIST is fine; the daemon checks ownership
  if (lock_fd_ < 0) {
    int fd = open((dir + "/daemon.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    __atomic_store_n(&lock_fd_, fd, __ATOMIC_SEQ_CST);
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    // Another local process won the election; it starts the daemon.
    close(__atomic_exchange_n(&lock_fd_, -1, __ATOMIC_SEQ_CST));
    return;
  }
  std::string bin = FindDaemonBinary(daemon_bin_);
  if (bin.empty()) {
    ring_->Count(XPU_CNT_INTERNAL);
    Note(daemon_bin_.empty()
             ? "cannot start a daemon: no xpu-daemon next to libxpu_hook.so, in its ../bin or "
               "../daemon, or on PATH (set XPU_DAEMON_BIN); this process is not traced to the engine"
             : "cannot start a daemon: XPU_DAEMON_BIN=" + daemon_bin_ +
                   " is not executable; this process is not traced to the engine");
    // Let another process (perhaps one that has the binary) try.
    close(__atomic_exchange_n(&lock_fd_, -1, __ATOMIC_SEQ_CST));
    return;
  }
  std::vector<std::string> env_store;
  std::vector<char*> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    // The daemon must not trace itself.
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) continue;
    envp.push_back(*e);
  }
  envp.push_back(nullptr);
  std::string log = dir + "/daemon.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own session: the daemon outlives this process and its terminal/group
  // signals. Default signal mask, not ours (this thread blocks everything).
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  std::string socket_flag = "--socket";
  std::string engine_flag = "--engine";
  std::string idle_flag = "--idle-exit-s";
  // An auto-started daemon belongs to the jobs that started it: it goes
  // once no traced process has used it for a while and all is delivered.
  std::vector<char*> argv = {bin.data(), socket_flag.data(), socket_path_.data(),
                             idle_flag.data(), idle_exit_s_.data()};
  if (!engine_.empty()) {  // else the daemon's own default
    argv.push_back(engine_flag.data());
    argv.push_back(engine_.data());
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, bin.c_str(), &fa, &attr, argv.data(), envp.data()); err == 0) {
    spawned_ = pid;
  } else {
    ring_->Count(XPU_CNT_INTERNAL);
    Note("cannot start " + bin + ": " + strerror(err) + "; this process is not traced to the engine");
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  // Keep the lock until a daemon acks (see Tick) so that peers do not spawn
  // a second one while this one starts.
}

}  // namespace xpu::hook
