// hook/process/library_init.cc — the shared library's constructor, destructor
// and fork handler. Only in libxpu_hook.so (not in the xpu_hook_core archive
// that unit tests link), so that tests build the runtime themselves.
//
// The constructor runs single-threaded in the loader: it reads the
// environment and creates the ring, and nothing else — no CUDA calls (the
// runtime may not be loaded yet, and initialising CUDA in a constructor can
// deadlock the loader) and no threads (the background thread starts on the
// first traced call, EnsureStarted).
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "hook/core_api.h"
#include "hook/process/config.h"
#include "hook/process/runtime.h"

namespace xpu::hook {
namespace {

void ForkChild() { DisableInForkedChild(); }

__attribute__((constructor)) void LibraryInit() {
  ReentrancyGuard guard;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  Config config =
      LoadConfig([](const char* name) { return getenv(name); }, getpid(), getuid(), host);
  std::string error;
  if (!InitRuntime(config, getpid(), &error)) return;  // hook stays a pass-through
  pthread_atfork(nullptr, nullptr, &ForkChild);
}

__attribute__((destructor)) void LibraryFini() {
  // Usually a no-op: the atexit handler registered at first use flushed
  // already, while CUDA was still alive.
  ShutdownRuntime(100 * 1000 * 1000);
}

}  // namespace
}  // namespace xpu::hook
