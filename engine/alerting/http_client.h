// http_client — a blocking HTTP/1.1 client over libcurl for Alertmanager,
// webhooks and the tests' Prometheus queries: http:// and https:// (the
// server's certificate is verified against the system roots or a given CA
// bundle), HTTP basic or bearer authentication, one timeout for the whole
// request. No redirects are followed and no proxy is used (the receivers are
// addressed directly, as the operator configured them).
// Thread-safety: stateless; callable from any thread (one curl handle per
// request; libcurl's global initialisation runs once, on first use).
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
  std::string scheme = "http";  // http or https
  std::string host;
  int port = 80;  // the scheme's default when the URL names none
  std::string path = "/";
};
// Parses "http[s]://host[:port][/path]"; other schemes are errors.
absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

// Credentials sent with a request: at most one of the two.
struct HttpAuth {
  std::string basic;   // "USER:PASSWORD" (HTTP basic); empty = none
  std::string bearer;  // token for "Authorization: Bearer"; empty = none
  bool empty() const { return basic.empty() && bearer.empty(); }
};
// Reads the credentials of one receiver from files ("" = none): the basic
// file holds USER:PASSWORD, the bearer file the token; surrounding whitespace
// is stripped. Both files, an unreadable or empty file, or a basic file
// without ':' are errors; `what` names the receiver in them.
absl::StatusOr<HttpAuth> ReadHttpAuth(const std::string& basic_file, const std::string& bearer_file,
                                      const std::string& what);

struct HttpOptions {
  HttpAuth auth;
  std::string ca_file;  // PEM bundle verifying https servers; empty = system roots
  std::string content_type = "application/json";
  int timeout_ms = 5000;  // connect, send and receive together
};

// `method` GET or POST; `body` sent with Content-Type `content_type` when not
// empty (always for POST). Any HTTP status is a response; transport errors
// (unreachable, TLS verification, timeout) are errors.
absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body, const HttpOptions& options);
absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body = "",
                                         const std::string& content_type = "application/json",
                                         int timeout_ms = 5000);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_HTTP_CLIENT_H_
