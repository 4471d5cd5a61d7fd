// xpu-engine: parses flags, starts the Engine, waits for SIGINT/SIGTERM.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "engine/engine.h"
#include "spdlog/spdlog.h"

#ifdef XPU_ENGINE_JEMALLOC
#include <jemalloc/jemalloc.h>

// jemalloc's settings, read at the process's first allocation (MALLOC_CONF
// in the environment comes after them, and wins): two arenas beside each
// thread's own cache, and freed pages given back to the system after about
// a second by a background thread, not by the threads that free them.
extern "C" const char* malloc_conf =
    "narenas:2,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
#endif

namespace {

// The allocator in use, for the log, and the --malloc-arenas flag, which
// only glibc's allocator takes (before any thread allocates: every thread
// that mallocs may otherwise get an arena of its own, gRPC's threads, the
// ingest workers, the detector threads, each holding its freed memory).
std::string SetUpAllocator(int malloc_arenas) {
#ifdef XPU_ENGINE_JEMALLOC
  const char* version = "?";
  unsigned arenas = 0;
  bool background = false;
  size_t size = sizeof(version);
  mallctl("version", &version, &size, nullptr, 0);
  size = sizeof(arenas);
  mallctl("opt.narenas", &arenas, &size, nullptr, 0);
  size = sizeof(background);
  mallctl("opt.background_thread", &background, &size, nullptr, 0);
  std::string what = "jemalloc " + std::string(version).substr(0, std::string(version).find('-')) +
                     ", " + std::to_string(arenas) + " arenas";
  if (background) what += ", background purging";
  if (malloc_arenas != xpu::engine::EngineOptions{}.malloc_arenas) {
    what +=
        "; --malloc-arenas has no effect (glibc's allocator only): MALLOC_CONF=narenas:N sets "
        "jemalloc's";
  }
  return what;
#else
  if (malloc_arenas > 0) mallopt(M_ARENA_MAX, malloc_arenas);
  return malloc_arenas > 0 ? "glibc, " + std::to_string(malloc_arenas) + " arenas"
                           : std::string("glibc, its default arenas");
#endif
}

}  // namespace

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
  const std::string allocator = SetUpAllocator(opts->malloc_arenas);
  (void)xpu::logging::InitLogging({"xpu-engine", opts->log_level, /*file=*/""});  // stderr
  spdlog::info("memory allocator: {}", allocator);

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
