// log_util.h — named spdlog loggers and a rate limiter for per-record paths.
//
// Every component of the daemon logs through its own named logger
// ("ring", "hook_server", "collector", "engine_client", "daemon") so that
// levels can be read per component. Loggers are created on first use and
// shared; spdlog's registry is thread-safe.
#ifndef XPU_DAEMON_LOG_UTIL_H_
#define XPU_DAEMON_LOG_UTIL_H_

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace xpu::daemon {

// Returns the logger called `name`, creating it (stderr sink) if needed.
std::shared_ptr<spdlog::logger> GetLogger(const std::string& name);

// Sets the level of every existing and future daemon logger.
void SetLogLevel(spdlog::level::level_enum level);

// Allows at most `burst` events per `interval_ns`; the rest are counted as
// suppressed and reported with the next allowed event. Thread-safe, lock-free.
class RateLimiter {
 public:
  RateLimiter(uint32_t burst, uint64_t interval_ns) : burst_(burst), interval_ns_(interval_ns) {}
  // Returns true when the caller may log now; `*suppressed` receives the
  // number of events swallowed since the last allowed one.
  bool Allow(uint64_t now_ns, uint64_t* suppressed);

 private:
  const uint32_t burst_;
  const uint64_t interval_ns_;
  std::atomic<uint64_t> window_start_{0};
  std::atomic<uint32_t> in_window_{0};
  std::atomic<uint64_t> suppressed_{0};
};

// CLOCK_REALTIME and CLOCK_MONOTONIC in nanoseconds.
uint64_t RealtimeNs();
uint64_t MonotonicNs();

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_LOG_UTIL_H_
