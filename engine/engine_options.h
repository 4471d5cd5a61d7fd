// engine_options — xpu-engine's command-line flags and the start-up security
// rules that depend on them.
#ifndef XPU_ENGINE_ENGINE_OPTIONS_H_
#define XPU_ENGINE_ENGINE_OPTIONS_H_

#include <algorithm>
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
  std::string token_file;  // shared token: every permission (docs/security.md)
  // Per-role tokens (docs/security.md): read, act (and read), admin (and
  // act), ingest (daemons).
  std::string read_token_file;
  std::string act_token_file;
  std::string admin_token_file;
  std::string ingest_token_file;
  // Local callers: the identity socket ("auto": abstract @xpu-engine-<port>,
  // "off", or a name) and how long its tokens hold.
  std::string identity_socket = "auto";
  double identity_ttl_s = 3600;
  std::string admin_group;            // members act on every job, as root does
  bool metrics_allow_remote = false;  // a non-loopback --metrics-addr on purpose
  std::string db_group;               // history files 0640 with this group (else 0600)
  uint64_t db_max_mb = 0;             // SQLite page limit (0: none)
  uint64_t db_retry_rows = 200000;    // failed history rows kept for retry
  // Caps (engine/ingest_service.h, IngestLimits).
  uint64_t max_jobs = 1024;
  uint64_t max_ranks_per_job = 131072;
  uint64_t max_processes_per_stream = 8192;
  uint64_t max_job_buffer_mb = 65536;
  uint64_t max_queued_writes = 1024;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  double silent_after_s = 30;
  double window_s = 10;
  uint64_t max_receive_bytes = 64ull << 20;
  uint64_t ring_records = 65536;             // recent records kept per rank
  uint64_t tcp_read_chunk_bytes = 16 << 10;  // largest read of a stream (gRPC)
  // glibc malloc arenas of the process (mallopt M_ARENA_MAX, set by main
  // before any thread starts); 0 = glibc's default (8 per core).
  int malloc_arenas = 1;
  // Threads that run one job's view-based detectors at once (1: one after
  // another on the window thread); used for jobs of detector_parallel_min_ranks+.
  int detector_threads = 4;
  int detector_parallel_min_ranks = 1024;
  // Threads that handle what the daemons' streams read (engine/ingest_stream.h).
  int ingest_threads = 4;
  // Nice value added to the window thread and the threads it starts (the
  // detectors'): the ingest goes first when the cores are short, so that a
  // window's records are in it when it is analysed. 0 = as the engine.
  int window_nice = 5;
  // Seconds after a window's end at which it is analysed: its records that
  // started before the end and reached the engine within this time are in
  // it; those that started after wait for the next. < 0: min(3, window/10).
  double window_grace_s = -1;
  double WindowGraceS() const {
    return window_grace_s >= 0 ? window_grace_s : std::min(3.0, window_s / 10);
  }
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
  // Series of a finished job stay on /metrics this long after its last
  // record, then are removed (docs/metrics.md, "Retention").
  double metrics_retain_finished_s = 900;
  // Links in alerts: Grafana's base URL ("" = no dashboard link) and the
  // base of the docs' runbook anchors ("" = the docs/ path of the sources).
  std::string grafana_url;
  std::string docs_url;
  // Engine replicas sharing one PostgreSQL --db (docs/deploy.md): each job
  // is served by one replica under a lease in the database. Off while
  // replica_id is empty.
  std::string replica_id;
  std::string advertise_addr;  // where daemons reach this replica; "" = from --listen
  double lease_ttl_s = 0;      // 0 = half of window_s, at least 1 s
  bool help = false;           // --help was given (EngineUsage() is the text)
  bool version = false;        // --version was given
};

// Parses --flag=value and --flag value forms (common/cli/flags.h). Unknown
// flags and bad values are errors.
absl::StatusOr<EngineOptions> ParseEngineFlags(const std::vector<std::string>& args);
// The --help text: every flag, its meaning and its default.
std::string EngineUsage();

// True when every address `host_port` resolves to is loopback, or for unix:
// sockets (common/rpc/address.h).
bool IsLoopbackAddress(const std::string& host_port);
// Refuses a non-loopback --listen without TLS or a token, a non-loopback
// --metrics-addr without --metrics-allow-remote, a half-configured TLS pair,
// a client CA without TLS, and an engine nobody could call (no identity
// socket, no token, no client certificates).
absl::Status ValidateSecurity(const EngineOptions& o);
// Reads a secret file and strips surrounding whitespace; empty is an error.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const char* what);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ENGINE_OPTIONS_H_
