// common/rpc/local_identity.cc — see local_identity.h.
#include "common/rpc/local_identity.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/address.h"

namespace xpu::rpc {

std::string LocalIdentityName(int port) { return absl::StrCat("xpu-engine-", port); }

absl::StatusOr<std::string> FetchLocalIdentityFrom(const std::string& name, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path))
    return absl::InvalidArgumentError("bad identity socket name");
  memcpy(addr.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    close(fd);
    return absl::NotFoundError(
        absl::StrCat("no engine identity socket @", name, ": ", strerror(err)));
  }
  std::string line;
  char buf[256];
  while (line.find('\n') == std::string::npos && line.size() < 512) {
    pollfd p{fd, POLLIN, 0};
    const int pr = poll(&p, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  std::istringstream in(line);
  std::string magic, version, token;
  in >> magic >> version >> token;
  if (magic != kLocalIdentityMagic || version != "1" ||
      token.rfind(kLocalTokenPrefix, 0) != 0 || token.size() > 200) {
    return absl::UnavailableError(absl::StrCat("unexpected answer on @", name));
  }
  return token;
}

absl::StatusOr<std::string> FetchLocalIdentity(const std::string& address, int timeout_ms) {
  if (const char* name = getenv("XPU_IDENTITY_SOCKET"); name != nullptr && *name != '\0')
    return FetchLocalIdentityFrom(name, timeout_ms);
  absl::StatusOr<HostPort> hp = SplitAddress(address);
  if (!hp.ok()) return hp.status();
  if (hp->unix_socket || hp->port.empty())
    return absl::FailedPreconditionError(absl::StrCat(address, ": no port"));
  int port = 0;
  if (!absl::SimpleAtoi(hp->port, &port) || port <= 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat(address, ": bad port"));
  if (absl::Status st = CheckLoopback(address); !st.ok()) return st;
  return FetchLocalIdentityFrom(LocalIdentityName(port), timeout_ms);
}

}  // namespace xpu::rpc
