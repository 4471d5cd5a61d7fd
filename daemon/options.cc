#include "daemon/options.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace xpu::daemon {
namespace {

struct Flag {
  const char* name;
  const char* arg;  // nullptr for booleans
  const char* help;
  std::function<absl::Status(DaemonOptions&, const std::string&)> set;
  std::function<std::string(const DaemonOptions&)> get_default;
};

std::function<absl::Status(DaemonOptions&, const std::string&)> Str(
    std::string DaemonOptions::*field) {
  return [field](DaemonOptions& o, const std::string& v) {
    o.*field = v;
    return absl::OkStatus();
  };
}
std::function<absl::Status(DaemonOptions&, const std::string&)> Num(uint64_t DaemonOptions::*field,
                                                                    uint64_t min,
                                                                    const char* name) {
  return [field, min, name](DaemonOptions& o, const std::string& v) {
    uint64_t n;
    if (!absl::SimpleAtoi(v, &n) || n < min) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs an integer >= ", min, ", got '", v, "'"));
    }
    o.*field = n;
    return absl::OkStatus();
  };
}
std::function<absl::Status(DaemonOptions&, const std::string&)> Bool(bool DaemonOptions::*field) {
  return [field](DaemonOptions& o, const std::string&) {
    o.*field = true;
    return absl::OkStatus();
  };
}
std::function<std::string(const DaemonOptions&)> ShowStr(std::string DaemonOptions::*field) {
  return [field](const DaemonOptions& o) { return o.*field; };
}
std::function<std::string(const DaemonOptions&)> ShowNum(uint64_t DaemonOptions::*field) {
  return [field](const DaemonOptions& o) { return std::to_string(o.*field); };
}

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"socket", "PATH",
       "Unix socket the hook connects to. Default: $XPU_DAEMON_SOCKET, else "
       "$XDG_RUNTIME_DIR/xpu/daemon.sock, "
       "else /run/xpu/daemon.sock (root), else /tmp/xpu-<uid>/daemon.sock.",
       Str(&DaemonOptions::socket), nullptr},
      {"engine", "HOST:PORT", "Engine address (gRPC Ingest service).", Str(&DaemonOptions::engine),
       ShowStr(&DaemonOptions::engine)},
      {"no-engine", nullptr, "Do not connect to an engine: only drain rings and keep history.",
       Bool(&DaemonOptions::no_engine), nullptr},
      {"token-file", "PATH", "File holding the engine token (else $XPU_TOKEN).",
       Str(&DaemonOptions::token_file), nullptr},
      {"tls-ca", "PATH", "PEM CA bundle: use TLS and verify the engine's certificate.",
       Str(&DaemonOptions::tls_ca), nullptr},
      {"tls-cert", "PATH", "PEM client certificate (TLS client authentication; with --tls-key).",
       Str(&DaemonOptions::tls_cert), nullptr},
      {"tls-key", "PATH", "PEM client private key (with --tls-cert).", Str(&DaemonOptions::tls_key),
       nullptr},
      {"insecure", nullptr,
       "Allow plaintext to a non-loopback engine (loopback is always allowed).",
       Bool(&DaemonOptions::insecure), nullptr},
      {"history-records", "N", "Records of history kept per process (preallocated, 32 bytes each).",
       Num(&DaemonOptions::history_records, 1, "history-records"),
       ShowNum(&DaemonOptions::history_records)},
      {"retain-exited-s", "S", "Seconds an exited process (and its history) is kept.",
       Num(&DaemonOptions::retain_exited_s, 0, "retain-exited-s"),
       ShowNum(&DaemonOptions::retain_exited_s)},
      {"window-s", "S", "Aggregation window in seconds.",
       Num(&DaemonOptions::window_s, 1, "window-s"), ShowNum(&DaemonOptions::window_s)},
      {"flush-ms", "MS", "Interval between batches sent to the engine.",
       Num(&DaemonOptions::flush_ms, 10, "flush-ms"), ShowNum(&DaemonOptions::flush_ms)},
      {"buffer-mb", "MB",
       "Batches buffered while the engine is unreachable; beyond it the oldest records drop.",
       Num(&DaemonOptions::buffer_mb, 1, "buffer-mb"), ShowNum(&DaemonOptions::buffer_mb)},
      {"drain-ms", "MS", "Interval between ring drains when idle.",
       Num(&DaemonOptions::drain_ms, 1, "drain-ms"), ShowNum(&DaemonOptions::drain_ms)},
      {"abandon-grace-ms", "MS",
       "An uncommitted slot the producer has passed is skipped after this long.",
       Num(&DaemonOptions::abandon_grace_ms, 0, "abandon-grace-ms"),
       ShowNum(&DaemonOptions::abandon_grace_ms)},
      {"max-processes", "N", "Most rings registered at once.",
       Num(&DaemonOptions::max_processes, 1, "max-processes"),
       ShowNum(&DaemonOptions::max_processes)},
      {"max-ring-mb", "MB", "Largest ring file accepted.",
       Num(&DaemonOptions::max_ring_mb, 1, "max-ring-mb"), ShowNum(&DaemonOptions::max_ring_mb)},
      {"allow-any-uid", nullptr,
       "Accept hooks of other users (always the case when running as root).",
       Bool(&DaemonOptions::allow_any_uid), nullptr},
      {"daemon-id", "ID", "Identity sent to the engine. Default: host:pid:start_ns.",
       Str(&DaemonOptions::daemon_id), nullptr},
      {"log-level", "LEVEL", "trace, debug, info, warn, error, critical or off.",
       Str(&DaemonOptions::log_level), ShowStr(&DaemonOptions::log_level)},
      {"log-file", "PATH",
       "Log to this file instead of stderr (default when detached: <socket dir>/daemon.log).",
       Str(&DaemonOptions::log_file), nullptr},
      {"foreground", nullptr,
       "Stay in the foreground. Without it the daemon detaches once its socket is ready.",
       Bool(&DaemonOptions::foreground), nullptr},
      {"help", nullptr, "Show this help.", Bool(&DaemonOptions::help), nullptr},
      {"version", nullptr, "Print the version.", Bool(&DaemonOptions::version), nullptr},
  };
  return flags;
}

}  // namespace

absl::StatusOr<DaemonOptions> ParseDaemonOptions(const std::vector<std::string>& args) {
  DaemonOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.rfind("--", 0) != 0)
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    a = a.substr(2);
    std::string value;
    bool has_value = false;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) {
      if (a == f.name) flag = &f;
    }
    if (flag == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", a, " (see --help)"));
    if (flag->arg == nullptr) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", a, " takes no value"));
    } else if (!has_value) {
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat("--", a, " needs ", flag->arg));
      value = args[++i];
    }
    absl::Status s = flag->set(o, value);
    if (!s.ok()) return s;
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok |= o.log_level == l;
  if (!level_ok)
    return absl::InvalidArgumentError(absl::StrCat("bad --log-level '", o.log_level, "'"));
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  return o;
}

std::string DaemonHelpText() {
  std::string out =
      "xpu-daemon: drains the XPUTimer rings of the training processes on this node, keeps\n"
      "their recent history, aggregates per-op windows and streams everything to the engine.\n"
      "\n"
      "Usage:\n"
      "  xpu-daemon --socket PATH --engine HOST:PORT [flags]   (what the hook's auto-start runs)\n"
      "  xpu-daemon --foreground --no-engine                    (standalone: drain + history "
      "only)\n"
      "\n"
      "Flags:\n";
  const DaemonOptions defaults;
  for (const Flag& f : Flags()) {
    std::string head = absl::StrCat("  --", f.name, f.arg ? absl::StrCat(" ", f.arg) : "");
    if (head.size() < 28) head.resize(28, ' ');
    absl::StrAppend(&out, head, " ", f.help);
    if (f.get_default) absl::StrAppend(&out, " [", f.get_default(defaults), "]");
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(
      &out,
      "\nSignals: SIGTERM/SIGINT shut down cleanly (rings are drained one last time and\n"
      "pending batches get a short chance to reach the engine).\n");
  return out;
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
