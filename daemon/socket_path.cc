#include "daemon/socket_path.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace xpu::daemon {
namespace {

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// mkdir -p; directories we create are 0700.
absl::Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode)
               ? absl::OkStatus()
               : absl::FailedPreconditionError(absl::StrCat(dir, " is not a directory"));
  }
  const std::string parent = Dirname(dir);
  if (parent != dir) {
    absl::Status s = MakeDirs(parent);
    if (!s.ok()) return s;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat("mkdir ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PrepareDirectory(const std::string& dir, bool enforce_private) {
  absl::Status s = MakeDirs(dir);
  if (!s.ok()) return s;
  if (!enforce_private) return absl::OkStatus();
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return absl::InternalError(absl::StrCat("lstat ", dir, ": ", strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a plain directory"));
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir, " is owned by uid ", st.st_uid, ", not by us"));
  }
  if ((st.st_mode & 0777) != 0700 && chmod(dir.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("chmod 0700 ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

bool SomeoneListens(const sockaddr_un& addr) {
  const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  const bool answered = connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(probe);
  return answered;
}

}  // namespace

SocketPath ResolveSocketPath(const std::string& flag) {
  if (!flag.empty()) return {flag, false};
  const char* env = getenv("XPU_DAEMON_SOCKET");
  if (env != nullptr && env[0] != '\0') return {env, false};
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] != '\0') return {absl::StrCat(xdg, "/xpu/daemon.sock"), true};
  if (geteuid() == 0) return {"/run/xpu/daemon.sock", true};
  return {absl::StrCat("/tmp/xpu-", geteuid(), "/daemon.sock"), true};
}

absl::StatusOr<std::unique_ptr<ListeningSocket>> ListeningSocket::Create(const SocketPath& sp) {
  const std::string& path = sp.path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path '", path, "' is empty or too long"));
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  absl::Status s = PrepareDirectory(Dirname(path), sp.from_default_rules);
  if (!s.ok()) return s;

  std::unique_ptr<ListeningSocket> ls(new ListeningSocket());
  ls->path_ = path;
  const std::string lock_path = path + ".lock";
  ls->lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (ls->lock_fd_ < 0)
    return absl::PermissionDeniedError(absl::StrCat("open ", lock_path, ": ", strerror(errno)));
  if (flock(ls->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("another daemon holds ", lock_path));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket"));
    }
    if (SomeoneListens(addr))
      return absl::AlreadyExistsError(absl::StrCat("a daemon already answers on ", path));
    unlink(path.c_str());  // stale: nothing answers
  }
  ls->fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (ls->fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const mode_t old_mask = umask(0177);  // the socket file is born 0600
  const int rc = bind(ls->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  umask(old_mask);
  if (rc != 0) return absl::InternalError(absl::StrCat("bind ", path, ": ", strerror(bind_errno)));
  chmod(path.c_str(), 0600);
  if (listen(ls->fd_, 128) != 0)
    return absl::InternalError(absl::StrCat("listen: ", strerror(errno)));
  if (stat(path.c_str(), &st) == 0) ls->inode_ = st.st_ino;
  return ls;
}

ListeningSocket::~ListeningSocket() {
  if (fd_ >= 0) {
    struct stat st;
    // Remove the file only if it is still the one we bound.
    if (stat(path_.c_str(), &st) == 0 && st.st_ino == inode_) unlink(path_.c_str());
    close(fd_);
  }
  if (lock_fd_ >= 0) close(lock_fd_);
}

}  // namespace xpu::daemon
