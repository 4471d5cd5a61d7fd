#include "daemon/options.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/cli/flags.h"
#include "common/rpc/address.h"

namespace xpu::daemon {
namespace {

// Every flag of xpu-daemon, bound to `o`.
void AddDaemonFlags(CLI::App& app, DaemonOptions* o) {
  app.add_option("--socket", o->socket,
                 "Unix socket the hook connects to. Default: $XPU_DAEMON_SOCKET, else "
                 "$XDG_RUNTIME_DIR/xpu/daemon.sock, else /run/xpu/daemon.sock (root), else "
                 "/tmp/xpu-<uid>/daemon.sock.")
      ->type_name("PATH");
  app.add_option("--engine", o->engine,
                 "Engine address (gRPC Ingest service). Engine replicas sharing PostgreSQL: "
                 "their addresses, comma-separated; the daemon uses the first that answers and "
                 "follows its redirects (docs/deploy.md).")
      ->type_name("HOST:PORT[,...]");
  app.add_flag("--no-engine", o->no_engine,
               "Do not connect to an engine: only drain rings and keep history.");
  app.add_option("--token-file", o->token_file, "File holding the engine token (else $XPU_TOKEN).")
      ->type_name("PATH");
  app.add_option("--tls-ca", o->tls_ca,
                 "PEM CA bundle: use TLS and verify the engine's certificate.")
      ->type_name("PATH");
  auto* tls_cert = app.add_option("--tls-cert", o->tls_cert,
                                  "PEM client certificate (TLS client authentication; with "
                                  "--tls-key).")
                       ->type_name("PATH");
  auto* tls_key =
      app.add_option("--tls-key", o->tls_key, "PEM client private key (with --tls-cert).")
          ->type_name("PATH");
  tls_cert->needs(tls_key);
  tls_key->needs(tls_cert);
  app.add_flag("--insecure", o->insecure,
               "Allow plaintext to a non-loopback engine (loopback is always allowed).");
  app.add_option("--wire", o->wire,
                 "Record encoding to the engine: compact (11-12 bytes a record instead of 32, "
                 "sent only to an engine that says it reads it; raw otherwise) or raw.")
      ->type_name("ENCODING")
      ->check(CLI::IsMember({"compact", "raw"}));
  app.add_option("--history-records", o->history_records,
                 "Records of history kept per process (preallocated, 32 bytes each).")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--retain-exited-s", o->retain_exited_s,
                 "Seconds an exited process (and its history) is kept.")
      ->type_name("S")
      ->transform(flags::UnsignedAtLeast(0));
  app.add_option("--window-s", o->window_s,
                 "Ignored: the daemon no longer sums records into windows (the engine cuts the "
                 "windows). Accepted so that existing command lines still start.")
      ->type_name("S")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--flush-ms", o->flush_ms, "Interval between batches sent to the engine.")
      ->type_name("MS")
      ->transform(flags::UnsignedAtLeast(10));
  app.add_option("--buffer-mb", o->buffer_mb,
                 "Batches buffered while the engine is unreachable; beyond it the oldest records "
                 "drop.")
      ->type_name("MB")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--drain-ms", o->drain_ms, "Interval between ring drains when idle.")
      ->type_name("MS")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--abandon-grace-ms", o->abandon_grace_ms,
                 "An uncommitted slot the producer has passed is skipped after this long.")
      ->type_name("MS")
      ->transform(flags::UnsignedAtLeast(0));
  app.add_option("--max-processes", o->max_processes, "Most rings registered at once.")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--max-ring-mb", o->max_ring_mb, "Largest ring file accepted.")
      ->type_name("MB")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_flag("--allow-any-uid", o->allow_any_uid,
               "Accept hooks of other users (always the case when running as root).");
  app.add_option("--daemon-id", o->daemon_id,
                 "Identity sent to the engine. Default: host:pid:start_ns.")
      ->type_name("ID");
  app.add_option("--log-level", o->log_level, "trace, debug, info, warn, error, critical or off.")
      ->type_name("LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--metrics-addr", o->metrics_addr,
                 "Serve Prometheus /metrics and /healthz on HOST:PORT (default: not served; the "
                 "daemon's counters also reach the engine). An address that resolves to "
                 "anything but loopback needs --metrics-allow-remote.")
      ->type_name("HOST:PORT");
  app.add_flag("--metrics-allow-remote", o->metrics_allow_remote,
               "Serve /metrics and /healthz on a non-loopback --metrics-addr (they carry job "
               "ids and counts, without authentication).");
  app.add_option("--log-file", o->log_file,
                 "Log to this file instead of stderr (default when detached: <socket "
                 "dir>/daemon.log).")
      ->type_name("PATH");
  app.add_option("--idle-exit-s", o->idle_exit_s,
                 "Exit after this many seconds with no traced process and nothing left to send "
                 "(0: run until stopped). The hook starts daemons with 600 "
                 "($XPU_DAEMON_IDLE_EXIT_S).")
      ->type_name("S");
  app.add_flag("--foreground", o->foreground,
               "Stay in the foreground. Without it the daemon detaches once its socket is ready.");
}

void ConfigureDaemonApp(CLI::App& app, DaemonOptions* o) {
  flags::Configure(app, "xpu-daemon");
  app.description(
      "xpu-daemon: drains the XPUTimer rings of the training processes on this node, keeps\n"
      "their recent history and streams everything to the engine.\n"
      "\n"
      "  xpu-daemon --socket PATH --idle-exit-s 600 --engine HOST:PORT   (what the hook's auto-start runs)\n"
      "  xpu-daemon --foreground --no-engine                    (standalone: drain + history "
      "only)\n");
  app.footer(
      "Signals: SIGTERM/SIGINT shut down cleanly (rings are drained one last time and\n"
      "pending batches get a short chance to reach the engine).");
  AddDaemonFlags(app, o);
}

}  // namespace

absl::StatusOr<DaemonOptions> ParseDaemonOptions(const std::vector<std::string>& args) {
  DaemonOptions o;
  CLI::App app;
  ConfigureDaemonApp(app, &o);
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
      return absl::InvalidArgumentError(
          absl::StripSuffix(absl::StripPrefix(r.text, "xpu-daemon: "), "\n"));
  }
  if (!o.help && !o.version && !o.metrics_addr.empty() && !o.metrics_allow_remote) {
    // Resolved, never judged by spelling (common/rpc/address.h).
    if (absl::Status lo = rpc::CheckLoopback(o.metrics_addr); !lo.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to serve /metrics on ", o.metrics_addr, " (", lo.message(),
          "): it carries job ids and counts without authentication; give "
          "--metrics-allow-remote if that is intended"));
    }
  }
  return o;
}

std::string DaemonHelpText() {
  CLI::App app;
  DaemonOptions defaults;
  ConfigureDaemonApp(app, &defaults);
  return app.help();
}

absl::StatusOr<std::string> ResolveToken(const DaemonOptions& options) {
  if (!options.token_file.empty()) {
    std::ifstream in(options.token_file);
    if (!in)
      return absl::NotFoundError(absl::StrCat("cannot read --token-file ", options.token_file));
    std::stringstream ss;
    ss << in.rdbuf();
    return std::string(absl::StripAsciiWhitespace(ss.str()));
  }
  const char* env = getenv("XPU_TOKEN");
  return std::string(env != nullptr ? env : "");
}

}  // namespace xpu::daemon
