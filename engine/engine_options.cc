#include "engine/engine_options.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cli/flags.h"
#include "common/rpc/address.h"

namespace xpu::engine {

namespace {

// What the engine holds in memory: messages, rings, allocator, reads.
void AddMemoryFlags(CLI::App& app, EngineOptions* o) {
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
  app.add_option_function<double>(
         "--tcp-read-chunk-kb",
         [o](double kb) { o->tcp_read_chunk_bytes = static_cast<uint64_t>(kb * 1024.0); },
         "largest read of a daemon stream: each stream keeps a read buffer of up to this "
         "size (larger messages take several reads)")
      ->type_name("KB")
      ->default_str(std::to_string(o->tcp_read_chunk_bytes >> 10))
      ->check(flags::PositiveNumberUpTo(4096));
  app.add_option("--detector-threads", o->detector_threads,
                 "threads that run a large job's detectors at once in its window tick (jobs of "
                 "--detector-parallel-min-ranks or more); 1 runs them one after another. A "
                 "100k-rank job's detectors take about 35 s of CPU per window (docs/scale.md)")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--detector-parallel-min-ranks", o->detector_parallel_min_ranks,
                 "the ranks from which a job's detectors run on --detector-threads threads")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(2, 100000000));
  app.add_option("--ingest-threads", o->ingest_threads,
                 "threads that handle the batches the daemons send, whatever the number of "
                 "daemons (gRPC reads the streams on its own few threads); a job's batches take "
                 "its lock, so more threads help when several jobs send at once")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--window-grace-s", o->window_grace_s,
                 "seconds after a window's end at which it is analysed: the records that "
                 "started before the end and arrived by then are in it, those that started "
                 "after it wait for the next window; default min(3, --window-s / 10)")
      ->type_name("S")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--window-nice", o->window_nice,
                 "niceness added to the window tick's threads (the detectors'), so that the "
                 "ingest goes first when the engine's cores are short: records applied late land "
                 "in the next window (xpu_ingest_records_late_total); 0 runs them as the rest")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(0, 19));
  app.add_option("--malloc-arenas", o->malloc_arenas,
                 "glibc's allocator arenas (M_ARENA_MAX), for an engine built without jemalloc "
                 "(-DXPU_ENGINE_JEMALLOC=OFF): fewer arenas hold less freed memory per thread; "
                 "0 = glibc's default, 8 per core. The default build uses jemalloc, which "
                 "MALLOC_CONF tunes (narenas:N)")
      ->type_name("N")
      ->check(CLI::Range(0, 1024));
}

// Every flag of xpu-engine, bound to `o`.
void AddEngineFlags(CLI::App& app, EngineOptions* o) {
  app.add_option("--listen", o->listen,
                 "gRPC address for daemons and the CLI. An address that resolves to anything but "
                 "loopback requires TLS or a token file.")
      ->type_name("ADDR");
  app.add_option("--metrics-addr", o->metrics_addr,
                 "Prometheus /metrics and /healthz; \"off\" disables the endpoint; a non-loopback "
                 "address needs --metrics-allow-remote")
      ->type_name("ADDR");
  app.add_option("--db", o->db,
                 "history: a SQLite file (WAL mode), or a PostgreSQL URL "
                 "postgresql://USER@HOST:PORT/DB?sslmode=... (password from ~/.pgpass, "
                 "PGPASSFILE or passfile=, never the command line)")
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
  AddMemoryFlags(app, o);
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

  app.add_option("--detector-config", o->detector_config,
                 "detector thresholds (key = value; docs/diagnosis-catalogue.md)")
      ->type_name("PATH");
  app.add_option("--resolve-after-windows", o->resolve_after_windows,
                 "windows without a report before a diagnosis resolves")
      ->type_name("N")
      ->check(flags::PositiveNumber());
  app.add_option("--metrics-retain-finished-s", o->metrics_retain_finished_s,
                 "series of a finished job stay on /metrics this long after its last record")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--grafana-url", o->grafana_url,
                 "Grafana base URL: alerts link to the job's dashboard (default: no link)")
      ->type_name("URL")
      ->group(kAlerting);
  app.add_option("--docs-url", o->docs_url,
                 "base URL of the docs/ directory for the runbook links of alerts "
                 "(default: the path docs/ of the sources)")
      ->type_name("URL")
      ->group(kAlerting);

  const std::string kReplicas = "Engine replicas sharing PostgreSQL (docs/deploy.md)";
  app.add_option("--replica-id", o->replica_id,
                 "run as one of several engine replicas on the PostgreSQL --db: this replica's "
                 "name, stable across its restarts. Each job is served by one replica under a "
                 "lease; daemons that reach another replica are redirected to it, and the jobs "
                 "of a replica that stops move to the others (default: off, one engine)")
      ->type_name("ID")
      ->group(kReplicas);
  app.add_option("--advertise-addr", o->advertise_addr,
                 "HOST:PORT where daemons reach this replica when redirected to it (default: "
                 "--listen; required when --listen is a wildcard address)")
      ->type_name("ADDR")
      ->group(kReplicas);
  app.add_option("--lease-ttl-s", o->lease_ttl_s,
                 "a replica's jobs may move to another replica this long after it last renewed "
                 "its lease (renewed every quarter of it; default: half of --window-s, at least "
                 "1 s)")
      ->type_name("S")
      ->check(CLI::NonNegativeNumber)
      ->group(kReplicas);
}

void AddSecurityFlags(CLI::App& app, EngineOptions* o) {
  const std::string kAccess = "Access (docs/security.md)";
  app.add_option("--read-token-file", o->read_token_file,
                 "token that may read every job (status, ranks, diagnoses, reports)")
      ->type_name("PATH")
      ->group(kAccess);
  app.add_option("--act-token-file", o->act_token_file,
                 "token that may also act on every job (stacks, profiling, timeline dumps)")
      ->type_name("PATH")
      ->group(kAccess);
  app.add_option("--admin-token-file", o->admin_token_file,
                 "token that may also administer (calibrations, history)")
      ->type_name("PATH")
      ->group(kAccess);
  app.add_option("--ingest-token-file", o->ingest_token_file,
                 "token daemons present to send records of any user")
      ->type_name("PATH")
      ->group(kAccess);
  app.add_option("--identity-socket", o->identity_socket,
                 "local callers' identity socket: auto (abstract @xpu-engine-<port>), off, or a "
                 "name")
      ->type_name("NAME")
      ->group(kAccess);
  app.add_option("--identity-ttl-s", o->identity_ttl_s, "lifetime of a local identity token")
      ->type_name("S")
      ->check(flags::PositiveNumber())
      ->group(kAccess);
  app.add_option("--admin-group", o->admin_group,
                 "members of this group read and act on every job, as root does")
      ->type_name("GROUP")
      ->group(kAccess);
  app.add_flag("--metrics-allow-remote", o->metrics_allow_remote,
               "serve /metrics and /healthz on a non-loopback --metrics-addr (they carry job "
               "names and figures, without authentication)")
      ->group(kAccess);
  app.add_option("--db-group", o->db_group,
                 "history files (SQLite) are created 0640 with this group (default 0600)")
      ->type_name("GROUP")
      ->group(kAccess);
}

void AddLimitFlags(CLI::App& app, EngineOptions* o) {
  const std::string kLimits = "Limits (a client beyond them is refused and counted)";
  app.add_option("--max-jobs", o->max_jobs, "live jobs")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
  app.add_option("--max-ranks-per-job", o->max_ranks_per_job, "processes of one job")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
  app.add_option("--max-processes-per-stream", o->max_processes_per_stream,
                 "processes one daemon stream may send")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
  app.add_option("--max-queued-writes", o->max_queued_writes,
                 "messages the engine may hold for one daemon that has not read them yet "
                 "(batch acknowledgements, commands): one more cancels its stream")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
  app.add_option("--max-job-buffer-mb", o->max_job_buffer_mb,
                 "memory the recent-record rings of one job may hold: a new process is refused "
                 "once they hold this much (a ring grows with its window's records up to "
                 "--ring-records and keeps its newest 128 between windows)")
      ->type_name("MB")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
  app.add_option("--db-max-mb", o->db_max_mb,
                 "largest history database (SQLite page limit); 0 = the disk's")
      ->type_name("MB")
      ->transform(flags::UnsignedAtLeast(0))
      ->group(kLimits);
  app.add_option("--db-retry-rows", o->db_retry_rows,
                 "history rows kept for retry while writes fail; older ones are dropped, counted")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1))
      ->group(kLimits);
}

void ConfigureEngineApp(CLI::App& app, EngineOptions* o) {
  flags::Configure(app, "xpu-engine");
  app.description(
      "xpu-engine: central ingest, diagnosis and history for XPUTimer.\n"
      "Daemons stream records to it over gRPC; the xpu CLI queries it.");
  app.footer("Signals: SIGTERM/SIGINT shut down cleanly.");
  AddEngineFlags(app, o);
  AddSecurityFlags(app, o);
  AddLimitFlags(app, o);
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
  if (o.window_grace_s >= o.window_s) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--window-grace-s ", o.window_grace_s, " must be shorter than --window-s ", o.window_s));
  }
  return o;
}

bool IsLoopbackAddress(const std::string& addr) { return rpc::IsLoopback(addr); }

absl::Status ValidateSecurity(const EngineOptions& o) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key must be given together");
  }
  const bool tls = !o.tls_cert.empty();
  if (!o.tls_client_ca.empty() && !tls) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  const bool tokens = !o.token_file.empty() || !o.read_token_file.empty() ||
                      !o.act_token_file.empty() || !o.admin_token_file.empty() ||
                      !o.ingest_token_file.empty();
  if (absl::Status lo = rpc::CheckLoopback(o.listen); !lo.ok() && !tls && !tokens) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", o.listen, " without protection (", lo.message(),
        "): give --tls-cert/--tls-key (optionally --tls-client-ca) or a token file, or listen "
        "on 127.0.0.1"));
  }
  if (o.metrics_addr != "off" && !o.metrics_addr.empty() && !o.metrics_allow_remote) {
    if (absl::Status lo = rpc::CheckLoopback(o.metrics_addr); !lo.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("refusing to serve /metrics on ", o.metrics_addr, " (", lo.message(),
                       "): it carries job names and figures without authentication; give "
                       "--metrics-allow-remote if that is intended"));
    }
  }
  if (o.identity_socket == "off" && !tokens && o.tls_client_ca.empty()) {
    return absl::FailedPreconditionError(
        "with --identity-socket off, give a token file or --tls-client-ca: nobody could call "
        "this engine");
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
