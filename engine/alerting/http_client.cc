#include "engine/alerting/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace xpu::engine {
namespace {

using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms > 0 ? static_cast<int>(ms) : 0;
}

bool WaitFd(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  while (true) {
    int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Decodes a chunked body; returns false when malformed.
bool Dechunk(const std::string& in, std::string* out) {
  size_t pos = 0;
  out->clear();
  while (pos < in.size()) {
    size_t eol = in.find("\r\n", pos);
    if (eol == std::string::npos) return false;
    std::string len_hex = in.substr(pos, eol - pos);
    len_hex = len_hex.substr(0, len_hex.find(';'));
    size_t len = 0;
    if (len_hex.empty() || !absl::SimpleHexAtoi(len_hex, &len)) return false;
    pos = eol + 2;
    if (len == 0) return true;
    if (pos + len > in.size()) return false;
    out->append(in, pos, len);
    pos += len + 2;
  }
  return false;
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  if (!absl::StartsWith(url, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "': only http:// URLs are supported"));
  }
  HttpUrl u;
  std::string rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.path = rest.substr(slash);
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    if (!absl::SimpleAtoi(hostport.substr(colon + 1), &u.port) || u.port <= 0 || u.port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("'", url, "': bad port"));
    }
    u.host = hostport.substr(0, colon);
  } else {
    u.host = hostport;
  }
  if (u.host.empty()) return absl::InvalidArgumentError(absl::StrCat("'", url, "': no host"));
  return u;
}

absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body, const std::string& content_type,
                                         int timeout_ms) {
  absl::StatusOr<HttpUrl> u = ParseHttpUrl(url);
  if (!u.ok()) return u.status();
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(u->host.c_str(), std::to_string(u->port).c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", u->host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS && WaitFd(fd, POLLOUT, deadline)) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) break;
      last_error = std::strerror(err);
    } else {
      last_error = errno == EINPROGRESS ? "connect timed out" : std::strerror(errno);
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0)
    return absl::UnavailableError(
        absl::StrCat("connect ", u->host, ":", u->port, ": ", last_error));

  std::string req = absl::StrCat(method, " ", u->path, " HTTP/1.1\r\nHost: ", u->host, ":", u->port,
                                 "\r\nConnection: close\r\nAccept: application/json\r\n");
  if (!body.empty() || method == "POST") {
    absl::StrAppend(&req, "Content-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&req, "\r\n", body);
  size_t sent = 0;
  while (sent < req.size()) {
    if (!WaitFd(fd, POLLOUT, deadline)) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("sending to ", url));
    }
    ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      std::string e = std::strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat("send to ", url, ": ", e));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string resp;
  char buf[16384];
  while (true) {
    if (!WaitFd(fd, POLLIN, deadline)) {
      close(fd);
      return absl::DeadlineExceededError(absl::StrCat("waiting for ", url));
    }
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      std::string e = std::strerror(errno);
      close(fd);
      return absl::UnavailableError(absl::StrCat("recv from ", url, ": ", e));
    }
    resp.append(buf, static_cast<size_t>(n));
    if (resp.size() > (64u << 20)) break;
  }
  close(fd);
  size_t hdr_end = resp.find("\r\n\r\n");
  if (!absl::StartsWith(resp, "HTTP/1.") || hdr_end == std::string::npos || resp.size() < 12) {
    return absl::DataLossError(absl::StrCat("malformed HTTP response from ", url));
  }
  HttpResponse r;
  if (!absl::SimpleAtoi(resp.substr(9, 3), &r.status)) {
    return absl::DataLossError(absl::StrCat("malformed HTTP status from ", url));
  }
  std::string headers = absl::AsciiStrToLower(resp.substr(0, hdr_end));
  r.body = resp.substr(hdr_end + 4);
  if (absl::StrContains(headers, "transfer-encoding: chunked")) {
    std::string plain;
    if (!Dechunk(r.body, &plain))
      return absl::DataLossError(absl::StrCat("malformed chunked body from ", url));
    r.body = std::move(plain);
  }
  return r;
}

}  // namespace xpu::engine
