#include "engine/engine_options.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cli/flags.h"

namespace xpu::engine {

namespace {

// Every flag of xpu-engine, bound to `o`.
void AddEngineFlags(CLI::App& app, EngineOptions* o) {
  app.add_option("--listen", o->listen,
                 "gRPC address for daemons and the CLI. A non-loopback address requires TLS or "
                 "--token-file.")
      ->type_name("ADDR");
  app.add_option("--metrics-addr", o->metrics_addr,
                 "Prometheus /metrics and /healthz; \"off\" disables the endpoint")
      ->type_name("ADDR");
  app.add_option("--db", o->db,
                 "history: a SQLite file (WAL mode), or a PostgreSQL URL "
                 "postgresql://USER@HOST:PORT/DB?sslmode=... (password from ~/.pgpass, "
                 "PGPASSFILE or passfile=) that engine replicas share")
      ->type_name("PATH|URL");
  app.add_option("--token-file", o->token_file,
                 "shared token that daemons (DaemonHello.token) and the CLI (x-xpu-token "
                 "metadata) must present")
      ->type_name("PATH");
  app.add_option("--tls-cert", o->tls_cert, "server certificate (PEM); needs --tls-key")
      ->type_name("PATH");
  app.add_option("--tls-key", o->tls_key, "server private key (PEM)")->type_name("PATH");
  app.add_option("--tls-client-ca", o->tls_client_ca,
                 "require client certificates signed by this CA (needs TLS)")
      ->type_name("PATH");
  app.add_option("--silent-after-s", o->silent_after_s,
                 "a rank or daemon silent this long is marked silent")
      ->type_name("S")
      ->check(flags::PositiveNumber());
  app.add_option("--window-s", o->window_s,
                 "analysis window: liveness, detectors, summaries, metrics refresh")
      ->type_name("S")
      ->check(flags::PositiveNumber());
  app.add_option_function<double>(
         "--max-receive-mb",
         [o](double mb) { o->max_receive_bytes = static_cast<uint64_t>(mb * 1048576.0); },
         "largest accepted gRPC message (below 2048)")
      ->type_name("MB")
      ->default_str(std::to_string(o->max_receive_bytes >> 20))
      ->check(flags::PositiveNumberUpTo(2047));
  app.add_option("--ring-records", o->ring_records, "recent records kept in memory per rank")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--log-level", o->log_level, "trace, debug, info, warn, error")
      ->type_name("LEVEL");

  const std::string kAlerting = "Diagnoses out of the engine (docs/operations.md)";
  app.add_option("--alertmanager-url", o->alertmanager_url,
                 "post diagnoses to Prometheus Alertmanager (http:// or https://host:port)")
      ->type_name("URL")
      ->group(kAlerting);
  app.add_option("--alertmanager-basic-auth-file", o->alertmanager_basic_auth_file,
                 "file holding USER:PASSWORD for Alertmanager (HTTP basic auth)")
      ->type_name("PATH")
      ->group(kAlerting);
  app.add_option("--alertmanager-bearer-token-file", o->alertmanager_bearer_token_file,
                 "file holding a bearer token for Alertmanager (Authorization: Bearer)")
      ->type_name("PATH")
      ->group(kAlerting);
  app.add_option("--webhook-url", o->webhook_url,
                 "post diagnosis changes as JSON to this URL (http:// or https://)")
      ->type_name("URL")
      ->group(kAlerting);
  app.add_option("--webhook-basic-auth-file", o->webhook_basic_auth_file,
                 "file holding USER:PASSWORD for the webhook (HTTP basic auth)")
      ->type_name("PATH")
      ->group(kAlerting);
  app.add_option("--webhook-bearer-token-file", o->webhook_bearer_token_file,
                 "file holding a bearer token for the webhook (Authorization: Bearer)")
      ->type_name("PATH")
      ->group(kAlerting);
  app.add_option("--alert-tls-ca", o->alert_tls_ca,
                 "CA bundle (PEM) that verifies https:// receivers; default: the system's")
      ->type_name("PATH")
      ->group(kAlerting);

  const std::string kReplicas = "Engine replicas sharing PostgreSQL (docs/deploy.md)";
  app.add_option("--replica-id", o->replica_id,
                 "this engine's name among the replicas of its --db; stable across restarts "
                 "(default: the advertised address)")
      ->type_name("ID")
      ->group(kReplicas);
  app.add_option("--advertise-addr", o->advertise_addr,
                 "HOST:PORT where daemons reach this replica when redirected to it (default: "
                 "--listen, with this host's name for 0.0.0.0 or [::])")
      ->type_name("ADDR")
      ->group(kReplicas);
  app.add_option("--lease-ttl-s", o->lease_ttl_s,
                 "a replica's jobs move to another one this long after it stops renewing its "
                 "lease (default: half of --window-s)")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber)
      ->group(kReplicas);

  app.add_option("--detector-config", o->detector_config,
                 "detector thresholds (key = value; docs/diagnosis-catalogue.md)")
      ->type_name("PATH");
  app.add_option("--resolve-after-windows", o->resolve_after_windows,
                 "windows without a report before a diagnosis resolves")
      ->type_name("N")
      ->check(flags::PositiveNumber());
}

void ConfigureEngineApp(CLI::App& app, EngineOptions* o) {
  flags::Configure(app, "xpu-engine");
  app.description(
      "xpu-engine: central ingest, diagnosis and history for XPUTimer.\n"
      "Daemons stream records to it over gRPC; the xpu CLI queries it.");
  app.footer("Signals: SIGTERM/SIGINT shut down cleanly.");
  AddEngineFlags(app, o);
}

}  // namespace

std::string EngineUsage() {
  CLI::App app;
  EngineOptions defaults;
  ConfigureEngineApp(app, &defaults);
  return app.help();
}

absl::StatusOr<EngineOptions> ParseEngineFlags(const std::vector<std::string>& args) {
  EngineOptions o;
  CLI::App app;
  ConfigureEngineApp(app, &o);
  const flags::ParseResult r = flags::Parse(app, args);
  switch (r.outcome) {
    case flags::Outcome::kRun:
      break;
    case flags::Outcome::kHelp:
      o.help = true;
      break;
    case flags::Outcome::kVersion:
      o.version = true;
      break;
    case flags::Outcome::kError:
      // Without the "xpu-engine: " prefix and the newline: the caller adds
      // its own.
      return absl::InvalidArgumentError(
          absl::StripSuffix(absl::StripPrefix(r.text, "xpu-engine: "), "\n"));
  }
  return o;
}

bool IsLoopbackAddress(const std::string& addr) {
  if (absl::StartsWith(addr, "unix:") || absl::StartsWith(addr, "unix-abstract:")) return true;
  std::string host = addr;
  if (absl::StartsWith(host, "[")) {
    size_t close = host.find(']');
    host = close == std::string::npos ? host : host.substr(1, close - 1);
  } else if (size_t colon = host.rfind(':');
             colon != std::string::npos && host.find(':') == colon) {
    host = host.substr(0, colon);  // host:port (IPv4 or name)
  }
  host = absl::AsciiStrToLower(host);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::Status ValidateSecurity(const EngineOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  const bool tls = !o.tls_cert.empty();
  if (!o.tls_client_ca.empty() && !tls) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (!IsLoopbackAddress(o.listen) && !tls && o.token_file.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on non-loopback address ", o.listen,
        " without protection: give --tls-cert/--tls-key (optionally --tls-client-ca) or "
        "--token-file, or listen on 127.0.0.1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s(absl::StripAsciiWhitespace(ss.str()));
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  return s;
}

}  // namespace xpu::engine
