#include "common/metrics/http_endpoint.h"

#include <CivetServer.h>

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

namespace xpu::metrics {
namespace {

class TextHandler : public CivetHandler {
 public:
  TextHandler(std::function<std::string()> body, std::string content_type)
      : body_(std::move(body)), content_type_(std::move(content_type)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::string body = body_();
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              content_type_.c_str(), body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  std::function<std::string()> body_;
  std::string content_type_;
};

}  // namespace

HttpEndpoint::HttpEndpoint(std::function<std::string()> body, std::function<std::string()> health)
    : body_(std::move(body)), health_(std::move(health)) {
  if (!health_) health_ = [] { return std::string("ok\n"); };
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::Status HttpEndpoint::Serve(const std::string& addr) {
  std::vector<std::string> options = {"listening_ports", addr, "num_threads", "2"};
  try {
    server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    // civetweb-cpp reports bind failures by throwing; stop it here.
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", addr, ": ", e.what()));
  }
  metrics_handler_ =
      std::make_unique<TextHandler>(body_, "text/plain; version=0.0.4; charset=utf-8");
  health_handler_ = std::make_unique<TextHandler>(health_, "text/plain");
  server_->addHandler("/metrics", metrics_handler_.get());
  server_->addHandler("/healthz", health_handler_.get());
  std::vector<int> ports = server_->getListeningPorts();
  port_ = ports.empty() ? 0 : ports[0];
  return absl::OkStatus();
}

void HttpEndpoint::Stop() {
  if (server_) server_->close();
  server_.reset();
}

}  // namespace xpu::metrics
