// hook/ring/ring_fault_guard.cc — see ring_fault_guard.h.
#include "hook/ring/ring_fault_guard.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "xpu/ring.h"

namespace xpu::hook {
namespace {

constexpr int kSlots = 8;  // rings per process (one in practice; tests make more)
constexpr uintptr_t kPage = 4096;

// One registered mapping. `base` is published last (release) and cleared
// first, so a handler that sees it sees the rest.
struct GuardSlot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
  std::atomic<int> fd{-1};
  // Offset from which the mapping is anonymous memory already (size: none).
  std::atomic<size_t> replaced_from{0};
};

GuardSlot g_slots[kSlots];
std::atomic<bool> g_rewiring{false};  // one handler rewires mappings at a time
std::atomic<uint64_t> g_answered{0};
// The disposition before ours; written once, before our handler is installed.
struct sigaction g_previous;

uintptr_t RoundUpToPage(uint64_t v) { return static_cast<uintptr_t>((v + kPage - 1) & ~(kPage - 1)); }

// Offset of the first page past the end of the file of `g` (its size when
// unknown).
uintptr_t EndOfFile(const GuardSlot& g, size_t size) {
  struct stat st;
  const int fd = g.fd.load(std::memory_order_relaxed);
  if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 0) {
    return RoundUpToPage(static_cast<uint64_t>(st.st_size));
  }
  return size;
}

// Maps anonymous memory over [from, what is anonymous already) of `g`.
// Only what is not anonymous yet: pages replaced earlier may hold what the
// hook wrote since. Caller holds g_rewiring. False when mmap failed.
bool ReplaceFrom(GuardSlot& g, uintptr_t base, uintptr_t from) {
  const size_t done = g.replaced_from.load(std::memory_order_relaxed);
  if (from >= done) return true;  // replaced already (another thread's fault)
  void* p = mmap(reinterpret_cast<void*>(base + from), done - from, PROT_READ | PROT_WRITE,
                 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  g.replaced_from.store(from, std::memory_order_relaxed);
  auto* h = reinterpret_cast<xpu_ring_header_v1*>(base);
  __atomic_fetch_add(&h->counters[XPU_CNT_RING_TRUNCATED], 1, __ATOMIC_RELAXED);
  g_answered.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Lock() {
  // Handlers on other threads may fault on the same ring at once: the
  // holder only issues two syscalls, so the wait is short.
  while (g_rewiring.exchange(true, std::memory_order_acquire)) sched_yield();
}
void Unlock() { g_rewiring.store(false, std::memory_order_release); }

// A fault at `addr`: replaces the lost pages of the mapping that holds it.
// True when the fault is ours and the faulting access can be retried.
bool AnswerFault(uintptr_t addr) {
  for (GuardSlot& g : g_slots) {
    const uintptr_t base = g.base.load(std::memory_order_acquire);
    const size_t size = g.size.load(std::memory_order_relaxed);
    if (base <= 1 || addr < base || addr - base >= size) continue;
    Lock();
    // Every page past the file's current end goes, not only the faulting
    // one: a truncation costs one signal, not one per page.
    uintptr_t from = (addr - base) & ~(kPage - 1);
    const uintptr_t eof = EndOfFile(g, size);
    if (eof < from) from = eof;
    const bool ok = ReplaceFrom(g, base, from);
    Unlock();
    return ok;
  }
  return false;
}

// A SIGBUS without a fault address: a handler installed after ours (Python's
// faulthandler does this) that took a fault of ours, gave the signal back to
// us and raised it again. Replaces the lost pages of every truncated ring;
// true when there were any, so that the faulting store, re-executed, goes
// through.
bool AnswerRaisedAfterFault() {
  bool any = false;
  for (GuardSlot& g : g_slots) {
    const uintptr_t base = g.base.load(std::memory_order_acquire);
    const size_t size = g.size.load(std::memory_order_relaxed);
    if (base <= 1) continue;
    Lock();
    const uintptr_t eof = EndOfFile(g, size);
    if (eof < g.replaced_from.load(std::memory_order_relaxed)) any |= ReplaceFrom(g, base, eof);
    Unlock();
  }
  return any;
}

// Hands a SIGBUS that is not ours to whoever had it before.
void ChainToPrevious(int sig, siginfo_t* info, void* ctx) {
  const struct sigaction prev = g_previous;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, ctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
             prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  } else if (prev.sa_handler == SIG_IGN && info != nullptr && info->si_code <= 0) {
    return;  // a SIGBUS sent by kill(): ignored, as before
  } else {
    // Default action. The previous disposition goes back: a fault re-executes
    // the faulting instruction and dies of it as it would have without us; a
    // SIGBUS sent by kill() is raised again (blocked until we return).
    sigaction(sig, &prev, nullptr);
    if (info == nullptr || info->si_code <= 0) raise(sig);
    return;
  }
  if ((prev.sa_flags & SA_RESETHAND) != 0) {
    // The kernel would have reset it after this delivery.
    g_previous.sa_handler = SIG_DFL;
    g_previous.sa_flags &= ~SA_SIGINFO;
  }
}

void OnSigbus(int sig, siginfo_t* info, void* ctx) {
  const int saved_errno = errno;
  // si_code > 0: raised by the kernel for a fault, si_addr is the address.
  const bool ours =
      info != nullptr && info->si_code > 0
          ? AnswerFault(reinterpret_cast<uintptr_t>(info->si_addr))
          : AnswerRaisedAfterFault();
  errno = saved_errno;
  if (!ours) ChainToPrevious(sig, info, ctx);
  errno = saved_errno;
}

bool InstallOnce() {
  static std::atomic<int> state{0};  // 0 not yet, 1 installing, 2 done, 3 failed
  int expected = 0;
  if (state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = OnSigbus;
    // SA_ONSTACK: on the application's alternate stack if it has one (a
    // fault on a thread near the end of its stack).
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    bool ok = sigaction(SIGBUS, nullptr, &g_previous) == 0 &&
              sigaction(SIGBUS, &sa, &g_previous) == 0;
    state.store(ok ? 2 : 3, std::memory_order_release);
    return ok;
  }
  while (state.load(std::memory_order_acquire) == 1) sched_yield();
  return state.load(std::memory_order_acquire) == 2;
}

}  // namespace

bool GuardRingMapping(void* base, size_t size, int fd) {
  if (base == nullptr || size == 0 || fd < 0 || !InstallOnce()) return false;
  for (GuardSlot& g : g_slots) {
    uintptr_t expected = 0;
    // Claimed with a placeholder address that no fault can match (1 is
    // never inside a mapping), then published for real.
    if (!g.base.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    g.size.store(0, std::memory_order_relaxed);
    g.fd.store(fd, std::memory_order_relaxed);
    g.replaced_from.store(size, std::memory_order_relaxed);
    g.size.store(size, std::memory_order_relaxed);
    g.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return true;
  }
  return false;
}

void UnguardRingMapping(void* base) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  for (GuardSlot& g : g_slots) {
    uintptr_t expected = b;
    if (b != 0 && g.base.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      // A handler that loaded `base` before this may still rewire the range
      // once; wait for it before the caller unmaps.
      while (g_rewiring.load(std::memory_order_acquire)) sched_yield();
      g.fd.store(-1, std::memory_order_relaxed);
      return;
    }
  }
}

uint64_t RingFaultsAnswered() { return g_answered.load(std::memory_order_relaxed); }

}  // namespace xpu::hook
