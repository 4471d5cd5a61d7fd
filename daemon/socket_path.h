// socket_path.h — where the daemon listens, per include/xpu/transport.h, and
// how the listening socket is created safely.
//
// Path: --socket, else $XPU_DAEMON_SOCKET, else $XDG_RUNTIME_DIR/xpu/daemon.sock,
// else /run/xpu/daemon.sock for root, else /tmp/xpu-<uid>/daemon.sock. The
// directory is created 0700; for the default paths an existing directory must
// be ours and not a symlink (another user could have planted it in /tmp). The
// socket is created 0600. A stale socket file is replaced only when nothing
// answers on it, under an flock so that two daemons starting together cannot
// both replace it.
#ifndef XPU_DAEMON_SOCKET_PATH_H_
#define XPU_DAEMON_SOCKET_PATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace xpu::daemon {

struct SocketPath {
  std::string path;
  bool from_default_rules = false;  // true unless given by flag or environment
};

// Resolves the socket path; `flag` wins when non-empty.
SocketPath ResolveSocketPath(const std::string& flag);

// A bound, listening SOCK_SEQPACKET socket plus the lock that guards its path.
// Closing it removes the socket file if it is still ours.
class ListeningSocket {
 public:
  static absl::StatusOr<std::unique_ptr<ListeningSocket>> Create(const SocketPath& path);
  ~ListeningSocket();
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  ListeningSocket() = default;
  int fd_ = -1;
  int lock_fd_ = -1;
  std::string path_;
  unsigned long inode_ = 0;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_SOCKET_PATH_H_
