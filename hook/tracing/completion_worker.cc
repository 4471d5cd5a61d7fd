// hook/tracing/completion_worker.cc — see completion_worker.h. Background
// thread only (except the flag accessors declared inline in the header).
#include "hook/tracing/completion_worker.h"

#include <signal.h>
#include <time.h>

#include <cmath>

#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/tracing/cupti_window.h"
#include "hook/tracing/gpu_model.h"
#include "hook/tracing/hang_watch.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kMs = 1000 * 1000;
constexpr uint64_t kHeartbeatNs = 100 * kMs;
constexpr int kBusyPolls = 64;  // polls without sleeping after the last progress
constexpr uint64_t kHangCheckNs = 100 * kMs;
constexpr uint32_t kMaxWatchedHeads = 256;  // streams examined per hang check

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
  head_.reset(new uint32_t[kMaxStreams]());
  tail_.reset(new uint32_t[kMaxStreams]());
  active_.reset(new uint16_t[kMaxStreams]());
  xpu_ring_header_v1* h = rt->ring.header();
  Watch().Init(h != nullptr ? reinterpret_cast<xpu_ring_progress_v1*>(
                                  reinterpret_cast<uint8_t*>(h) + XPU_RING_PROGRESS_OFFSET)
                            : nullptr,
               rt->ring.signatures(), rt->ring.layout().sig_capacity, HangWatchOptionsFromEnv());
  Window().Init(h != nullptr ? reinterpret_cast<xpu_ring_profile_ctl_v1*>(
                                   reinterpret_cast<uint8_t*>(h) + XPU_RING_PROFILE_OFFSET)
                             : nullptr,
                &rt->ring, &rt->sigs, CuptiWindowOptionsFromEnv());
}

bool CompletionWorker::Start() {
  // The thread must not take the application's signals (e.g. SIGINT for
  // Python's KeyboardInterrupt or a profiler's SIGPROF).
  sigset_t all, old;
  sigfillset(&all);
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
  for (;;) {
    uint64_t now = NowNs();
    Housekeeping(now);
    int done = PollOnce(now);
    uint64_t deadline = flush_deadline_ns_.load(std::memory_order_acquire);
    if (deadline != 0 &&
        ((pending_count_ == 0 && rt_->pending.in_flight() == 0) || now >= deadline)) {
      FlushIncomplete(NowNs());
      flushed_.store(true, std::memory_order_release);
      running_.store(false, std::memory_order_release);
      return;
    }
    if (done > 0) {
      idle_polls = 0;
      continue;
    }
    if (pending_count_ > 0 && ++idle_polls < kBusyPolls) continue;
    SleepNs(pending_count_ > 0 || deadline != 0 ? 100 * 1000 : 500 * 1000);
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
    if (rt_->pool.HasRequests()) rt_->pool.ServiceRequests(&rt_->clock);
    rt_->clock.MaybeRecalibrate(now);
    PublishGpuModel(rt_);  // once, after the first traced op (gpu_model.h)
  }
  if (now >= next_daemon_ns_) next_daemon_ns_ = rt_->daemon.Tick(now);
  // A daemon request for a profiling window; CUPTI is driven from here only.
  Window().Tick(now, rt_->cuda_ready.load(std::memory_order_acquire)
                         ? reinterpret_cast<const void*>(rt_->cuda.get_device)
                         : nullptr);
  if (now >= next_hang_check_ns_ && Watch().enabled()) {
    WatchedOp heads[kMaxWatchedHeads];
    uint32_t n = 0;
    for (uint32_t i = 0; i < active_count_ && n < kMaxWatchedHeads; ++i) {
      const PendingOp& p = rt_->pending.op(head_[active_[i]]);
      heads[n++] = WatchedOp{p.sig_id, p.seq, p.launch_ns, p.stream};
    }
    Watch().Check(heads, n, now);
    next_hang_check_ns_ = now + kHangCheckNs;
  }
}

void CompletionWorker::DrainSubmitted() {
  uint32_t slot = 0;
  while (rt_->pending.PopSubmitted(&slot)) {
    PendingOp& p = rt_->pending.op(slot);
    p.next = 0;
    uint16_t s = p.stream;
    if (head_[s] == 0) {
      head_[s] = slot;
      active_[active_count_++] = s;
    } else {
      rt_->pending.op(tail_[s]).next = slot;
    }
    tail_[s] = slot;
    ++pending_count_;
    Watch().OnIssued(WatchedOp{p.sig_id, p.seq, p.launch_ns}, p.launch_ns);
  }
}

int CompletionWorker::PollOnce(uint64_t now) {
  DrainSubmitted();
  if (pending_count_ == 0) return 0;
  const CudaApi& cuda = rt_->cuda;
  int written = 0;
  for (uint32_t i = 0; i < active_count_;) {
    uint16_t s = active_[i];
    while (head_[s] != 0) {
      uint32_t slot = head_[s];
      PendingOp& p = rt_->pending.op(slot);
      cudaError_t q = cuda.event_query(rt_->pool.Get(p.end_ev));
      if (q == cudaErrorNotReady) break;  // later ops on this stream are not done either
      head_[s] = p.next;
      if (head_[s] == 0) tail_[s] = 0;
      --pending_count_;
      if (q == cudaSuccess) {
        Complete(slot, now);
      } else {
        // A sticky error (device fault) or a destroyed context: the op will
        // never be observed complete; keep its launch on record.
        Count(XPU_CNT_CUDA_ERROR);
        Abandon(slot, now, XPU_REC_INCOMPLETE);
      }
      ++written;
    }
    if (head_[s] == 0) {
      active_[i] = active_[--active_count_];
    } else {
      ++i;
    }
  }
  return written;
}

int CompletionWorker::FlushIncomplete(uint64_t now) {
  int n = PollOnce(now);
  for (uint32_t i = 0; i < active_count_; ++i) {
    uint16_t s = active_[i];
    while (head_[s] != 0) {
      uint32_t slot = head_[s];
      head_[s] = rt_->pending.op(slot).next;
      --pending_count_;
      Abandon(slot, now, XPU_REC_INCOMPLETE);
      ++n;
    }
    tail_[s] = 0;
  }
  active_count_ = 0;
  return n;
}

void CompletionWorker::Complete(uint32_t slot, uint64_t now) {
  PendingOp& p = rt_->pending.op(slot);
  const CudaApi& cuda = rt_->cuda;
  xpu_record_v1 r{};
  r.sig_id = p.sig_id;
  r.seq = p.seq;
  r.stream = p.stream;
  uint16_t flags = p.flags;
  uint64_t duration_ns = 0;
  bool timed = false;
  if (p.start_ev != 0) {
    cudaEvent_t start = rt_->pool.Get(p.start_ev);
    uint64_t gpu_start = 0;
    float ms = 0;
    if (rt_->clock.MapGpuToHost(p.device, p.calib_gen, start, &gpu_start) &&
        cuda.event_elapsed(&ms, start, rt_->pool.Get(p.end_ev)) == cudaSuccess) {
      timed = true;
      r.start_ns = gpu_start;
      duration_ns = ms > 0 ? static_cast<uint64_t>(std::llround(double{ms} * 1e6)) : 0;
      r.issue_latency_ns =
          SaturateI32(static_cast<int64_t>(gpu_start) - static_cast<int64_t>(p.launch_ns));
      flags |= XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
    } else {
      Count(XPU_CNT_CUDA_ERROR);
    }
  }
  if (!timed) {
    // Completion-tracked only: an upper bound from launch to the poll that
    // saw the op done.
    flags = static_cast<uint16_t>((flags & ~(XPU_REC_TIMED | XPU_REC_SAMPLED)) | XPU_REC_NOT_TIMED);
    r.start_ns = p.launch_ns;
    duration_ns = now > p.launch_ns ? now - p.launch_ns : 0;
  }
  r.duration = EncodeDuration(duration_ns, &flags);
  r.flags = flags;
  rt_->ring.Write(r);
  Watch().OnCompleted(WatchedOp{p.sig_id, p.seq, p.launch_ns},
                      now > p.launch_ns ? now - p.launch_ns : 0, now);
  rt_->pool.Give(p.start_ev);
  rt_->pool.Give(p.end_ev);
  p.start_ev = p.end_ev = 0;
  rt_->pending.Release(slot);
  rt_->pending.AddInFlight(-1);
}

void CompletionWorker::Abandon(uint32_t slot, uint64_t now, uint16_t extra) {
  PendingOp& p = rt_->pending.op(slot);
  xpu_record_v1 r{};
  r.sig_id = p.sig_id;
  r.seq = p.seq;
  r.stream = p.stream;
  r.start_ns = p.launch_ns;
  uint16_t flags = static_cast<uint16_t>(((p.flags | extra) & ~(XPU_REC_TIMED | XPU_REC_SAMPLED)) |
                                         XPU_REC_NOT_TIMED);
  r.duration = EncodeDuration(now > p.launch_ns ? now - p.launch_ns : 0, &flags);
  r.flags = flags;
  rt_->ring.Write(r);
  Watch().OnCompleted(WatchedOp{p.sig_id, p.seq, p.launch_ns},
                      now > p.launch_ns ? now - p.launch_ns : 0, now);
  // The events may still be pending on a broken device: returning them is
  // still right, a later record on them simply overrides the old one.
  rt_->pool.Give(p.start_ev);
  rt_->pool.Give(p.end_ev);
  p.start_ev = p.end_ev = 0;
  rt_->pending.Release(slot);
  rt_->pending.AddInFlight(-1);
}

}  // namespace xpu::hook
