#include "common/ring/shm_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace xpu::ring {
namespace {

thread_local sigjmp_buf* tls_jump = nullptr;

void OnSigbus(int sig, siginfo_t*, void*) {
  sigjmp_buf* jump = tls_jump;
  if (jump != nullptr) {
    tls_jump = nullptr;
    siglongjmp(*jump, 1);
  }
  // Not a guarded access: restore the default action; returning re-executes
  // the faulting instruction, which then terminates the process as usual.
  signal(sig, SIG_DFL);
}

// Runs `fn` with SIGBUS turned into a `false` return. `fn` must only touch
// plain memory (no allocation, no objects with destructors).
template <typename Fn>
bool Guarded(Fn fn) {
  sigjmp_buf env;
  // savemask 0 is enough: SA_NODEFER keeps SIGBUS unblocked in the handler.
  if (sigsetjmp(env, 0) != 0) return false;
  tls_jump = &env;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tls_jump = nullptr;
  return true;
}

}  // namespace

void InstallShmFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, nullptr);
  });
}

bool ShmCopy(void* dst, const void* src, size_t n) {
  return Guarded([&] { memcpy(dst, src, n); });
}
bool ShmLoadAcquire32(const uint32_t* p, uint32_t* out) {
  return Guarded([&] { *out = __atomic_load_n(p, __ATOMIC_ACQUIRE); });
}
bool ShmLoadRelaxed32(const uint32_t* p, uint32_t* out) {
  return Guarded([&] { *out = __atomic_load_n(p, __ATOMIC_RELAXED); });
}
bool ShmLoadAcquire64(const uint64_t* p, uint64_t* out) {
  return Guarded([&] { *out = __atomic_load_n(p, __ATOMIC_ACQUIRE); });
}
bool ShmLoadRelaxed64(const uint64_t* p, uint64_t* out) {
  return Guarded([&] { *out = __atomic_load_n(p, __ATOMIC_RELAXED); });
}
bool ShmStoreRelease64(uint64_t* p, uint64_t v) {
  return Guarded([&] { __atomic_store_n(p, v, __ATOMIC_RELEASE); });
}
bool ShmStoreRelaxed64(uint64_t* p, uint64_t v) {
  return Guarded([&] { __atomic_store_n(p, v, __ATOMIC_RELAXED); });
}
bool ShmStoreRelease32(uint32_t* p, uint32_t v) {
  return Guarded([&] { __atomic_store_n(p, v, __ATOMIC_RELEASE); });
}
bool ShmStoreRelaxed32(uint32_t* p, uint32_t v) {
  return Guarded([&] { __atomic_store_n(p, v, __ATOMIC_RELAXED); });
}

}  // namespace xpu::ring
