// options.h — command-line flags of xpu-daemon.
//
// Parsed with the project's flag conventions (common/cli/flags.h: --flag
// value and --flag=value, --help, --version); every flag, its default and its
// help text are declared in one place, and parsing is unit-tested.
#ifndef XPU_DAEMON_OPTIONS_H_
#define XPU_DAEMON_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xpu::daemon {

struct DaemonOptions {
  std::string socket;  // empty: transport.h rules
  std::string engine = "127.0.0.1:7441";
  bool no_engine = false;
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
  // Record encoding to the engine: "compact" (when the engine reads it) or "raw".
  std::string wire = "compact";
  uint64_t history_records = 131072;
  uint64_t retain_exited_s = 600;
  uint64_t idle_exit_s = 0;  // --idle-exit-s: 0 = run until stopped
  uint64_t window_s = 5;  // --window-s: accepted, not used
  uint64_t flush_ms = 1000;
  uint64_t buffer_mb = 64;
  uint64_t drain_ms = 10;
  uint64_t abandon_grace_ms = 1000;
  uint64_t max_processes = 1024;
  uint64_t max_ring_mb = 4096;
  bool allow_any_uid = false;
  std::string daemon_id;  // empty: host:pid:start
  std::string log_level = "info";
  std::string log_file;
  std::string metrics_addr;  // --metrics-addr: /metrics + /healthz ("" = not served)
  bool metrics_allow_remote = false;  // a non-loopback --metrics-addr on purpose
  bool foreground = false;
  bool help = false;
  bool version = false;
};

// Parses argv (argv[0] skipped). Unknown flags and bad values are errors.
absl::StatusOr<DaemonOptions> ParseDaemonOptions(const std::vector<std::string>& args);

// The --help text: every flag with its default.
std::string DaemonHelpText();

// The engine token: --token-file (trimmed) if given, else $XPU_TOKEN, else "".
absl::StatusOr<std::string> ResolveToken(const DaemonOptions& options);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_OPTIONS_H_
