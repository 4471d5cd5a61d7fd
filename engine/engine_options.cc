#include "engine/engine_options.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace xpu::engine {

std::string EngineUsage() {
  return R"(xpu-engine: central ingest, diagnosis and history for XPUTimer.

Usage: xpu-engine [flags]

  --listen=ADDR          gRPC address for daemons and the CLI (default 127.0.0.1:7441).
                         A non-loopback address requires TLS or --token-file.
  --metrics-addr=ADDR    Prometheus /metrics and /healthz (default 127.0.0.1:9464; "off" disables)
  --db=PATH              SQLite history (default ./xpu-engine.db; WAL mode)
  --token-file=PATH      shared token daemons (DaemonHello.token) and the CLI
                         (x-xpu-token metadata) must present
  --tls-cert=PATH        server certificate (PEM); needs --tls-key
  --tls-key=PATH         server private key (PEM)
  --tls-client-ca=PATH   require client certificates signed by this CA (needs TLS)
  --silent-after-s=S     a rank or daemon silent this long is marked silent (default 30)
  --window-s=S           analysis window: liveness, detectors, summaries (default 10)
  --max-receive-mb=MB    largest accepted gRPC message (default 64)
  --ring-records=N       recent records kept in memory per rank (default 65536)
  --log-level=LEVEL      trace, debug, info, warn, error (default info)
  --alertmanager-url=URL post diagnoses to Prometheus Alertmanager (http://host:port)
  --webhook-url=URL      post diagnosis changes as JSON to this URL
  --detector-config=PATH detector thresholds (key = value; docs/diagnosis-catalogue.md)
  --resolve-after-windows=N  windows without a report before a diagnosis resolves (default 1)
  --help                 this text
)";
}

absl::StatusOr<EngineOptions> ParseEngineFlags(const std::vector<std::string>& args) {
  EngineOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (!absl::StartsWith(a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    }
    std::string name, value;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      name = a.substr(2, eq - 2);
      value = a.substr(eq + 1);
    } else {
      name = a.substr(2);
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = args[++i];
    }
    auto number = [&](double* out) -> absl::Status {
      if (!absl::SimpleAtod(value, out) || *out <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, ": '", value, "' is not a positive number"));
      }
      return absl::OkStatus();
    };
    double d = 0;
    if (name == "listen") {
      o.listen = value;
    } else if (name == "metrics-addr") {
      o.metrics_addr = value;
    } else if (name == "db") {
      o.db = value;
    } else if (name == "token-file") {
      o.token_file = value;
    } else if (name == "tls-cert") {
      o.tls_cert = value;
    } else if (name == "tls-key") {
      o.tls_key = value;
    } else if (name == "tls-client-ca") {
      o.tls_client_ca = value;
    } else if (name == "log-level") {
      o.log_level = value;
    } else if (name == "alertmanager-url") {
      o.alertmanager_url = value;
    } else if (name == "webhook-url") {
      o.webhook_url = value;
    } else if (name == "detector-config") {
      o.detector_config = value;
    } else if (name == "resolve-after-windows") {
      if (auto st = number(&d); !st.ok()) return st;
      o.resolve_after_windows = d;
    } else if (name == "silent-after-s") {
      if (auto st = number(&d); !st.ok()) return st;
      o.silent_after_s = d;
    } else if (name == "window-s") {
      if (auto st = number(&d); !st.ok()) return st;
      o.window_s = d;
    } else if (name == "max-receive-mb") {
      if (auto st = number(&d); !st.ok()) return st;
      if (d > 2047) return absl::InvalidArgumentError("--max-receive-mb must be below 2048");
      o.max_receive_bytes = static_cast<uint64_t>(d * 1048576.0);
    } else if (name == "ring-records") {
      if (auto st = number(&d); !st.ok()) return st;
      o.ring_records = static_cast<uint64_t>(d);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
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
