// http_client — a minimal blocking HTTP/1.1 client for plain-http endpoints
// (Alertmanager, webhooks, and the tests' Prometheus queries). One request
// per connection ("Connection: close"), bounded by a timeout on connect,
// send and receive. No TLS: put a local relay in front of an https receiver.
// Thread-safety: stateless; callable from any thread.
#ifndef XPU_ENGINE_ALERTING_HTTP_CLIENT_H_
#define XPU_ENGINE_ALERTING_HTTP_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"

namespace xpu::engine {

struct HttpResponse {
  int status = 0;
  std::string body;
};

struct HttpUrl {
  std::string host;
  int port = 80;
  std::string path = "/";
};
// Parses "http://host[:port][/path]"; https and other schemes are errors.
absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

// `method` GET or POST; `body` sent with Content-Type `content_type` when
// not empty.
absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body = "",
                                         const std::string& content_type = "application/json",
                                         int timeout_ms = 5000);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_HTTP_CLIENT_H_
