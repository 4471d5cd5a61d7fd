// hook/tracing/completion_worker.cc — see completion_worker.h. Background
// thread only (except the flag accessors declared inline in the header).
#include "hook/tracing/completion_worker.h"

#include <signal.h>
#include <time.h>

#include <algorithm>

#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/tracing/cupti_window.h"
#include "hook/tracing/gpu_model.h"
#include "hook/tracing/hang_watch.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kMs = 1000 * 1000;
constexpr uint64_t kHeartbeatNs = 100 * kMs;
constexpr int kBusyPolls = 64;  // polls without sleeping after the last progress
constexpr uint64_t kHangCheckNs = 100 * kMs;
constexpr uint32_t kMaxWatchedHeads = 256;  // streams examined per hang check
constexpr uint64_t kLaneIdleNs = 1000 * kMs;  // lanes idle this long are checked for a dead owner
constexpr uint64_t kOverheadEveryNs = 5000 * kMs;  // event-pair overhead re-measured

// Hang watch (hang_watch.h): touched by the completion thread only.
HangWatch& Watch() {
  static HangWatch* w = new HangWatch();  // never destroyed: the thread outlives exit
  return *w;
}

// Profiling windows (cupti_window.h): polled by the completion thread only.
CuptiWindow& Window() {
  static CuptiWindow* w = new CuptiWindow();  // never destroyed, like Watch()
  return *w;
}

void SleepNs(uint64_t ns) {
  struct timespec ts = {static_cast<time_t>(ns / 1000000000ull),
                        static_cast<long>(ns % 1000000000ull)};
  nanosleep(&ts, nullptr);
}

}  // namespace

void CompletionWorker::Init(Runtime* rt) {
  rt_ = rt;
  xpu_ring_header_v1* h = rt->ring.header();
  Watch().Init(h != nullptr ? reinterpret_cast<xpu_ring_progress_v1*>(
                                  reinterpret_cast<uint8_t*>(h) + XPU_RING_PROGRESS_OFFSET)
                            : nullptr,
               rt->ring.signatures(), rt->ring.layout().sig_capacity, HangWatchOptionsFromEnv());
  rt->tracker.Init(rt, &Watch(), rt->config.pending_max,
                   uint64_t{rt->config.uncovered_ms} * 1000 * 1000);
  Window().Init(h != nullptr ? reinterpret_cast<xpu_ring_profile_ctl_v1*>(
                                   reinterpret_cast<uint8_t*>(h) + XPU_RING_PROFILE_OFFSET)
                             : nullptr,
                &rt->ring, &rt->sigs, CuptiWindowOptionsFromEnv());
}

uint32_t CompletionWorker::pending_count() const { return rt_->tracker.pending(); }

bool CompletionWorker::Start() {
  // The thread must not take the application's signals (e.g. SIGINT for
  // Python's KeyboardInterrupt or a profiler's SIGPROF). Faults it raises
  // itself stay deliverable: a blocked synchronous SIGBUS kills the process
  // outright, and this thread writes the ring, whose file may be truncated
  // under it (hook/ring/ring_fault_guard.h answers that SIGBUS).
  sigset_t all, old;
  sigfillset(&all);
  for (int sig : {SIGBUS, SIGSEGV, SIGFPE, SIGILL}) sigdelset(&all, sig);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  running_.store(true, std::memory_order_release);
  int rc = pthread_create(&thread_, nullptr, &CompletionWorker::ThreadMain, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    running_.store(false, std::memory_order_release);
    return false;
  }
  pthread_detach(thread_);
  return true;
}

void* CompletionWorker::ThreadMain(void* self) {
  pthread_setname_np(pthread_self(), "xpu-hook");
  static_cast<CompletionWorker*>(self)->Run();
  return nullptr;
}

void CompletionWorker::Run() {
  // Everything this thread calls that might reach an interposer passes
  // straight through.
  ReentrancyGuard guard;
  int idle_polls = 0;
  // Sleeps stay well below the hold timeout, which this thread enforces.
  const uint64_t idle_sleep_ns = std::min<uint64_t>(500 * 1000, rt_->holds.timeout_ns() / 4);
  for (;;) {
    uint64_t now = NowNs();
    Housekeeping(now);
    int done = PollOnce(now);
    uint64_t deadline = flush_deadline_ns_.load(std::memory_order_acquire);
    if (deadline != 0 &&
        ((pending_count() == 0 && rt_->lanes.AllDrained()) || now >= deadline)) {
      FlushIncomplete(NowNs());
      flushed_.store(true, std::memory_order_release);
      running_.store(false, std::memory_order_release);
      return;
    }
    if (done > 0) {
      idle_polls = 0;
      continue;
    }
    const bool busy = pending_count() > 0;
    if (busy && ++idle_polls < kBusyPolls) continue;
    SleepNs(busy || deadline != 0 ? std::min<uint64_t>(100 * 1000, idle_sleep_ns) : idle_sleep_ns);
  }
}

void CompletionWorker::Housekeeping(uint64_t now) {
  if (now >= next_heartbeat_ns_) {
    rt_->ring.SetHeartbeat(now);
    next_heartbeat_ns_ = now + kHeartbeatNs;
  }
  if (!rt_->cuda_ready.load(std::memory_order_relaxed) && now >= next_resolve_ns_) {
    // libcudart may be loaded after the first traced call (e.g. by a Python
    // import): retry with backoff rather than give up.
    if (ResolveCudaApi(&rt_->cuda)) {
      rt_->cuda_ready.store(true, std::memory_order_release);
    } else {
      resolve_backoff_ns_ =
          resolve_backoff_ns_ == 0 ? 1000 * kMs : std::min(resolve_backoff_ns_ * 2, 60000 * kMs);
      next_resolve_ns_ = now + resolve_backoff_ns_;
    }
  }
  if (rt_->cuda_ready.load(std::memory_order_relaxed)) {
    if (rt_->pool.HasRequests() && rt_->pool.ServiceRequests(&rt_->clock) > 0) ServiceDevices();
    rt_->clock.MaybeRecalibrate(now);
    RemeasureOverhead(now);
    PublishGpuModel(rt_);  // once, after the first traced op (gpu_model.h)
  }
  if (uint32_t n = rt_->holds.ReleaseExpired(now)) Count(XPU_CNT_HOLD_TIMEOUT, n);
  if (now >= next_reclaim_ns_) {
    rt_->lanes.ReclaimDead(rt_->pid, now, kLaneIdleNs);
    next_reclaim_ns_ = now + kLaneIdleNs;
  }
  if (now >= next_daemon_ns_) next_daemon_ns_ = rt_->daemon.Tick(now);
  // A daemon request for a profiling window; CUPTI is driven from here only.
  Window().Tick(now, rt_->cuda_ready.load(std::memory_order_acquire)
                         ? reinterpret_cast<const void*>(rt_->cuda.get_device)
                         : nullptr);
  if (now >= next_hang_check_ns_ && Watch().enabled()) {
    WatchedOp heads[kMaxWatchedHeads];
    const uint32_t n = rt_->tracker.WatchedHeads(heads, kMaxWatchedHeads);
    Watch().Check(heads, n, now);
    next_hang_check_ns_ = now + kHangCheckNs;
  }
}

void CompletionWorker::ServiceDevices() {
  // libcuda is loaded once the runtime initialised a device: the optional
  // driver entry points can be looked up now.
  if (!driver_resolved_) driver_resolved_ = ResolveDriverApi(&rt_->cuda);
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    if (rt_->pool.state(dev) != EventPool::kReady || rt_->holds.Ready(dev)) continue;
    if (rt_->cuda.set_device(dev) != cudaSuccess) continue;
    rt_->holds.SetUp(dev);
    rt_->overhead.Measure(dev, rt_->clock.Stream(dev), 16);
  }
}

void CompletionWorker::RemeasureOverhead(uint64_t now) {
  if (now < next_overhead_ns_) return;
  next_overhead_ns_ = now + kOverheadEveryNs;
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    if (!rt_->clock.Calibrated(dev) || rt_->clock.Stream(dev) == nullptr) continue;
    if (rt_->cuda.set_device(dev) == cudaSuccess) {
      rt_->overhead.Measure(dev, rt_->clock.Stream(dev), 8);
    }
  }
}

int CompletionWorker::PollOnce(uint64_t now) {
  rt_->tracker.Drain(now);
  return rt_->tracker.Poll(now);
}

int CompletionWorker::FlushIncomplete(uint64_t now) { return rt_->tracker.FlushIncomplete(now); }

}  // namespace xpu::hook
