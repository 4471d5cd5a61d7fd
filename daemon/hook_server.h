// hook_server.h — accepts the hook's connections (include/xpu/transport.h).
//
// A SOCK_SEQPACKET listener served by one poll() thread. For each connection:
// SO_PEERCRED gives pid/uid/gid (the kernel's word, not the message's); peers
// of another uid are refused unless the daemon runs as root. The first
// message must be exactly one xpu_hello_v1 with exactly one SCM_RIGHTS fd;
// everything is validated (size, magic, versions, fd type and size, the ring
// header) and answered with one xpu_hello_ack_v1. Unexpected fds are closed.
// A registered connection stays open; EOF (or an error) tells the collector
// the process is gone, which drains the ring before marking it exited.
// Later messages (xpu_ctl_v1, reserved) are read and counted.
//
// Thread-safety: Start/Stop from one owner thread; stats() from any thread.
#ifndef XPU_DAEMON_HOOK_SERVER_H_
#define XPU_DAEMON_HOOK_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/logging/logging.h"
#include "common/ring/ring_reader.h"
#include "daemon/collector.h"
#include "daemon/socket_path.h"

namespace xpu::daemon {

struct HookServerOptions {
  SocketPath socket;
  // Accept peers of any uid (the default when running as root).
  bool allow_any_uid = false;
  size_t max_connections = 4096;
  // A connection that has not sent its hello by then is closed.
  uint64_t hello_timeout_ns = 10ull * 1000000000ull;
  ring::RingReaderOptions ring;
};

struct HookServerStats {
  uint64_t accepted = 0;
  uint64_t registered = 0;
  uint64_t denied_uid = 0;
  uint64_t bad_hello = 0;
  uint64_t bad_ring = 0;
  uint64_t busy = 0;
  uint64_t disconnected = 0;
  uint64_t ctl_messages = 0;
  uint64_t hello_timeouts = 0;
};

class HookServer {
 public:
  HookServer(const HookServerOptions& options, Collector* collector);
  ~HookServer();
  HookServer(const HookServer&) = delete;
  HookServer& operator=(const HookServer&) = delete;

  // Binds the socket and starts the thread.
  absl::Status Start();
  void Stop();
  const std::string& path() const { return options_.socket.path; }
  HookServerStats stats() const;

 private:
  struct Connection;
  void Run();
  void Accept();
  // Returns false when the connection must be closed.
  bool OnReadable(Connection& c);
  bool HandleHello(Connection& c);
  void SendAck(int fd, uint32_t status);

  const HookServerOptions options_;
  Collector* const collector_;
  std::unique_ptr<ListeningSocket> listener_;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::vector<std::unique_ptr<Connection>> conns_;         // owned by the thread
  logging::RateLimiter warn_limiter_{20, 10000000000ull};  // a local peer must not flood the log
  struct AtomicStats {
    std::atomic<uint64_t> accepted{0}, registered{0}, denied_uid{0}, bad_hello{0}, bad_ring{0},
        busy{0}, disconnected{0}, ctl_messages{0}, hello_timeouts{0};
  } stats_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_HOOK_SERVER_H_
