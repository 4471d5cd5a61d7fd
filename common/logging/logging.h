// common/logging/logging.h — one logging set-up for every program, named
// loggers per component, and a rate limiter for per-record paths.
//
// Each program's main calls InitLogging once, before it starts threads: it
// installs the program's default logger with one sink (a file, or stderr)
// and the level. Every component then logs through GetLogger("<component>")
// ("ring", "collector", "ingest", "store", "hang", ...), which shares that
// sink, so levels and destinations are set in one place and log lines say
// which component wrote them. A component used before InitLogging (unit
// tests) logs to stderr.
//
// Thread-safety: GetLogger and SetLogLevel are thread-safe (spdlog's
// registry is); InitLogging is meant for main before other threads run.
#ifndef XPU_COMMON_LOGGING_LOGGING_H_
#define XPU_COMMON_LOGGING_LOGGING_H_

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace xpu::logging {

struct LogOptions {
  std::string program;         // name of the default logger, e.g. "xpu-daemon"
  std::string level = "info";  // spdlog level name: trace, debug, info, warn, error, critical, off
  std::string file;            // empty: stderr; its directory is created (0700) if missing
};

// Installs the default logger and the level of every logger. When `file`
// cannot be opened the logs go to stderr and the error is returned (the
// program may go on).
absl::Status InitLogging(const LogOptions& options);

// The logger called `name`, created on first use with the default logger's
// sinks (stderr before InitLogging) at the current level.
std::shared_ptr<spdlog::logger> GetLogger(const std::string& name);

// Sets the level of every existing and future logger.
void SetLogLevel(spdlog::level::level_enum level);

// Allows at most `burst` events per `interval_ns`; the rest are counted as
// suppressed and reported with the next allowed event. Thread-safe, lock-free.
class RateLimiter {
 public:
  RateLimiter(uint32_t burst, uint64_t interval_ns) : burst_(burst), interval_ns_(interval_ns) {}
  // Returns true when the caller may log now; `*suppressed` receives the
  // number of events swallowed since the last allowed one.
  bool Allow(uint64_t now_ns, uint64_t* suppressed);
  // Allow() on the monotonic clock, for callers that do not report the
  // suppressed count.
  bool Allow();

 private:
  const uint32_t burst_;
  const uint64_t interval_ns_;
  std::atomic<uint64_t> window_start_{0};
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace xpu::logging

#endif  // XPU_COMMON_LOGGING_LOGGING_H_
