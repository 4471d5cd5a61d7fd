// http_endpoint — the HTTP side of a process's Prometheus metrics: /metrics
// (text exposition 0.0.4 of the body callback) and /healthz ("ok").
//
// prometheus::Exposer owns its civetweb server privately and can only serve
// collectables, so /healthz could not be added to it. We run one CivetServer
// ourselves (civetweb is what prometheus-cpp-pull uses too).
//
// Thread-safety: Serve/Stop from one thread; the body callback runs on the
// server's threads and must be thread-safe.
#ifndef XPU_COMMON_METRICS_HTTP_ENDPOINT_H_
#define XPU_COMMON_METRICS_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"

class CivetServer;
class CivetHandler;

namespace xpu::metrics {

class HttpEndpoint {
 public:
  // health: what /healthz answers (default "ok\n"); always HTTP 200.
  explicit HttpEndpoint(std::function<std::string()> body,
                        std::function<std::string()> health = nullptr);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Starts serving on addr ("127.0.0.1:9464"; port 0 picks a free one).
  absl::Status Serve(const std::string& addr);
  void Stop();
  // The port bound by Serve (0 before).
  int port() const { return port_; }

 private:
  std::function<std::string()> body_;
  std::function<std::string()> health_;
  std::unique_ptr<CivetServer> server_;
  std::unique_ptr<CivetHandler> metrics_handler_;
  std::unique_ptr<CivetHandler> health_handler_;
  int port_ = 0;
};

}  // namespace xpu::metrics

#endif  // XPU_COMMON_METRICS_HTTP_ENDPOINT_H_
