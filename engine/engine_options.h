// engine_options — xpu-engine's command-line flags and the start-up security
// rules that depend on them.
#ifndef XPU_ENGINE_ENGINE_OPTIONS_H_
#define XPU_ENGINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xpu::engine {

struct EngineOptions {
  std::string listen = "127.0.0.1:7441";
  std::string metrics_addr = "127.0.0.1:9464";  // "off" disables the endpoint
  std::string db = "./xpu-engine.db";
  std::string token_file;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  double silent_after_s = 30;
  double window_s = 10;
  uint64_t max_receive_bytes = 64ull << 20;
  uint64_t ring_records = 65536;  // recent records kept per rank
  std::string log_level = "info";
  // Diagnoses out of the engine (engine/alerting/): Alertmanager base URL
  // (POST /api/v2/alerts) and a generic JSON webhook; "" = off.
  std::string alertmanager_url;
  std::string webhook_url;
  // Credentials for them (engine/alerting/http_client.h), each read from a
  // file at start: "USER:PASSWORD" for HTTP basic auth, or a bearer token.
  // At most one of the two per target.
  std::string alertmanager_basic_auth_file;
  std::string alertmanager_bearer_token_file;
  std::string webhook_basic_auth_file;
  std::string webhook_bearer_token_file;
  std::string alert_tls_ca;          // CA bundle for https:// receivers ("" = system roots)
  std::string detector_config;       // thresholds file (engine/window/detector_config.h)
  double resolve_after_windows = 1;  // a diagnosis absent this many windows is resolved
  // Engine replicas (docs/architecture.md, "Engine replicas"): several
  // engines on one PostgreSQL database serve a cluster, each job served by
  // one of them under a lease. A lone engine (SQLite) is a replica too.
  std::string replica_id;      // "" = advertise_addr
  std::string advertise_addr;  // where daemons reach this engine; "" = from --listen
  double lease_ttl_s = 0;      // 0 = half of window_s
  bool help = false;                 // --help was given (EngineUsage() is the text)
  bool version = false;              // --version was given
};

// Parses --flag=value and --flag value forms (common/cli/flags.h). Unknown
// flags and bad values are errors.
absl::StatusOr<EngineOptions> ParseEngineFlags(const std::vector<std::string>& args);
// The --help text: every flag, its meaning and its default.
std::string EngineUsage();

// True for 127.0.0.0/8, ::1, localhost and unix: sockets.
bool IsLoopbackAddress(const std::string& host_port);
// Refuses a non-loopback --listen without TLS or a token, a half-configured
// TLS pair, or a client CA without TLS.
absl::Status ValidateSecurity(const EngineOptions& o);
// Reads a secret file and strips surrounding whitespace; empty is an error.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const char* what);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ENGINE_OPTIONS_H_
