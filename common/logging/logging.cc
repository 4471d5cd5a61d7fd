// common/logging/logging.cc — see logging.h.
#include "common/logging/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "common/base/clock.h"

namespace xpu::logging {
namespace {

std::mutex g_level_mu;
spdlog::level::level_enum g_level = spdlog::level::info;

// Logs name jobs, ranks and pids, and the daemon and engine often run as
// root: the file is created 0600 without following a symlink, must be a
// regular file of ours, and its directory must not let anyone else swap it
// (not writable by others, or sticky, where only we may replace our file).
// spdlog then opens the same file by name.
absl::Status PrepareLogFile(const std::string& file) {
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError("cannot open log file " + file + ": " +
                                  (errno == ELOOP ? "it is a symlink" : std::strerror(errno)));
  }
  struct stat st;
  const bool ours = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
  close(fd);
  if (!ours) return absl::FailedPreconditionError("log file " + file + " is not a file of ours");
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 ||
      ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)) {
    return absl::FailedPreconditionError("log directory " + dir +
                                         " is writable by others; give a private one");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InitLogging(const LogOptions& options) {
  absl::Status status;
  spdlog::sink_ptr sink;
  if (!options.file.empty()) {
    const size_t slash = options.file.rfind('/');
    if (slash != std::string::npos && slash > 0) mkdir(options.file.substr(0, slash).c_str(), 0700);
    status = PrepareLogFile(options.file);
    if (status.ok()) {
      try {
        sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file);
      } catch (const spdlog::spdlog_ex& e) {
        status = absl::UnavailableError("cannot open log file " + options.file + ": " + e.what());
      }
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
