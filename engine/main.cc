// xpu-engine: parses flags, starts the Engine, waits for SIGINT/SIGTERM.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "engine/engine.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<xpu::engine::EngineOptions> opts = xpu::engine::ParseEngineFlags(args);
  if (!opts.ok()) {
    std::fprintf(stderr, "xpu-engine: %s\n", std::string(opts.status().message()).c_str());
    return 2;
  }
  if (opts->help) {
    std::fputs(xpu::engine::EngineUsage().c_str(), stdout);
    return 0;
  }
  if (opts->version) {
    std::printf("%s\n", xpu::flags::VersionLine("xpu-engine").c_str());
    return 0;
  }
  // Before any thread allocates: every thread that mallocs may otherwise
  // get an arena of its own (gRPC's threads, the ingest workers, the
  // detector threads), each holding its freed memory.
  if (opts->malloc_arenas > 0) mallopt(M_ARENA_MAX, opts->malloc_arenas);
  (void)xpu::logging::InitLogging({"xpu-engine", opts->log_level, /*file=*/""});  // stderr

  // Block the signals before any thread starts so that only the watcher
  // below receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  absl::StatusOr<std::unique_ptr<xpu::engine::Engine>> engine = xpu::engine::Engine::Start(*opts);
  if (!engine.ok()) {
    std::fprintf(stderr, "xpu-engine: %s\n", std::string(engine.status().message()).c_str());
    return 1;
  }
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&set, &sig);
    spdlog::info("signal {}: shutting down", sig);
    (*engine)->Shutdown();
  });
  (*engine)->Wait();
  const absl::Status exit = (*engine)->exit_status();
  if (!exit.ok()) kill(getpid(), SIGTERM);  // stopped by itself: wake the watcher
  watcher.join();
  if (!exit.ok()) {
    std::fprintf(stderr, "xpu-engine: %s\n", std::string(exit.message()).c_str());
    return 1;
  }
  return 0;
}
