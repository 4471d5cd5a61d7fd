// common/rpc/address.cc — see address.h.
#include "common/rpc/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xpu::rpc {
namespace {

bool LoopbackSockaddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string Text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

absl::StatusOr<HostPort> SplitAddress(const std::string& address) {
  HostPort hp;
  std::string t = address;
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:")) {
    hp.unix_socket = true;
    hp.host = t.substr(t.find(':') + 1);
    return hp;
  }
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::StartsWith(t, scheme)) {
      t = t.substr(strlen(scheme));
      break;
    }
  }
  if (t.empty()) return absl::InvalidArgumentError("empty address");
  if (t[0] == '[') {
    const size_t end = t.find(']');
    if (end == std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat("unterminated [ in ", address));
    hp.host = t.substr(1, end - 1);
    if (end + 1 < t.size()) {
      if (t[end + 1] != ':') return absl::InvalidArgumentError(absl::StrCat("bad ", address));
      hp.port = t.substr(end + 2);
    }
    return hp;
  }
  const size_t first = t.find(':');
  if (first != std::string::npos && t.find(':', first + 1) != std::string::npos) {
    hp.host = t;  // a bare IPv6 address
    return hp;
  }
  hp.host = t.substr(0, first);
  if (first != std::string::npos) hp.port = t.substr(first + 1);
  return hp;
}

absl::Status CheckLoopback(const std::string& address) {
  absl::StatusOr<HostPort> hp = SplitAddress(address);
  if (!hp.ok()) return hp.status();
  if (hp->unix_socket) return absl::OkStatus();
  if (hp->host.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(address, " has no host: it would listen on every address"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(hp->host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot resolve ", hp->host, " (", gai_strerror(rc), ")"));
  }
  absl::Status st = absl::OkStatus();
  for (addrinfo* a = res; a != nullptr && st.ok(); a = a->ai_next) {
    if (!LoopbackSockaddr(a->ai_addr)) {
      st = absl::FailedPreconditionError(
          absl::StrCat(hp->host, " resolves to ", Text(a->ai_addr), ", which is not loopback"));
    }
  }
  freeaddrinfo(res);
  return st;
}

}  // namespace xpu::rpc
