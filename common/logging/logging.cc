// common/logging/logging.cc — see logging.h.
#include "common/logging/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <sys/stat.h>

#include <mutex>

#include "common/base/clock.h"

namespace xpu::logging {
namespace {

std::mutex g_level_mu;
spdlog::level::level_enum g_level = spdlog::level::info;

}  // namespace

absl::Status InitLogging(const LogOptions& options) {
  absl::Status status;
  spdlog::sink_ptr sink;
  if (!options.file.empty()) {
    const size_t slash = options.file.rfind('/');
    if (slash != std::string::npos && slash > 0) mkdir(options.file.substr(0, slash).c_str(), 0700);
    try {
      sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file);
    } catch (const spdlog::spdlog_ex& e) {
      status = absl::UnavailableError("cannot open log file " + options.file + ": " + e.what());
    }
  }
  if (!sink) sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(options.program, sink));
  SetLogLevel(spdlog::level::from_str(options.level));
  return status;
}

std::shared_ptr<spdlog::logger> GetLogger(const std::string& name) {
  auto logger = spdlog::get(name);
  if (logger) return logger;
  std::lock_guard<std::mutex> lock(g_level_mu);
  logger = spdlog::get(name);  // another thread may have won the race
  if (logger) return logger;
  auto sinks = spdlog::default_logger() ? spdlog::default_logger()->sinks()
                                        : std::vector<spdlog::sink_ptr>{};
  if (sinks.empty()) sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger = std::make_shared<spdlog::logger>(name, sinks.begin(), sinks.end());
  logger->set_level(g_level);
  spdlog::register_logger(logger);
  return logger;
}

void SetLogLevel(spdlog::level::level_enum level) {
  std::lock_guard<std::mutex> lock(g_level_mu);
  g_level = level;
  spdlog::set_level(level);
}

bool RateLimiter::Allow(uint64_t now_ns, uint64_t* suppressed) {
  uint64_t start = window_start_.load(std::memory_order_relaxed);
  if (now_ns - start >= interval_ns_ || now_ns < start) {
    if (window_start_.compare_exchange_strong(start, now_ns, std::memory_order_relaxed)) {
      in_window_.store(0, std::memory_order_relaxed);
    }
  }
  if (in_window_.fetch_add(1, std::memory_order_relaxed) < burst_) {
    *suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
  }
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  *suppressed = 0;
  return false;
}

bool RateLimiter::Allow() {
  uint64_t suppressed = 0;
  return Allow(MonotonicNs(), &suppressed);
}

}  // namespace xpu::logging
