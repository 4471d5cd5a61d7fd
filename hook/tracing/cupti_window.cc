// hook/tracing/cupti_window.cc — see cupti_window.h.
#include "hook/tracing/cupti_window.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "hook/core_api.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {
namespace {

constexpr uint64_t kMs = 1000000ull;

// The one window of the process, for CUPTI's callbacks (they carry no user
// pointer). Set by Init, never cleared: the object lives as long as the
// runtime, which is never destroyed.
std::atomic<CuptiWindow*> g_window{nullptr};

bool EnvUint(const char* name, uint64_t min, uint64_t max, uint64_t* out) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 10);
  if (end == v || *end != '\0' || x < min || x > max) return false;
  *out = x;
  return true;
}

template <typename T>
T ReadAt(const uint8_t* rec, size_t off) {
  T v;
  memcpy(&v, rec + off, sizeof(v));
  return v;
}

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

CuptiWindowOptions CuptiWindowOptionsFromEnv() {
  CuptiWindowOptions o;
  uint64_t v = 0;
  if (EnvUint("XPU_PROFILE_WINDOWS", 0, 1, &v)) o.enabled = v != 0;
  if (const char* p = getenv("XPU_CUPTI_PATH")) o.cupti_path = p;
  if (EnvUint("XPU_PROFILE_MAX_RECORDS", 1, 1u << 30, &v)) o.max_records = static_cast<uint32_t>(v);
  if (EnvUint("XPU_CUPTI_BUFFER_KB", 64, 64 * 1024, &v))
    o.buffer_bytes = static_cast<uint32_t>(v * 1024);
  if (EnvUint("XPU_CUPTI_MAX_BUFFERS", 1, 64, &v)) o.max_buffers = static_cast<uint32_t>(v);
  if (EnvUint("XPU_CUPTI_DETACH_WAIT_MS", 0, 60000, &v)) o.detach_wait_ns = v * kMs;
  return o;
}

CuptiWindow::~CuptiWindow() {
  // Only a test destroys a window; CUPTI must be back to idle by then.
  CuptiWindow* self = this;
  g_window.compare_exchange_strong(self, nullptr);
  if (state_ == State::kIdle) FreeBuffers();
}

void CuptiWindow::Init(xpu_ring_profile_ctl_v1* ctl, RingWriter* ring, SignatureTable* sigs,
                       const CuptiWindowOptions& options) {
  ctl_ = ctl;
  ring_ = ring;
  sigs_ = sigs;
  options_ = options;
  options_.max_buffers = std::clamp<uint32_t>(options_.max_buffers, 1, 64);
  g_window.store(this, std::memory_order_release);
  if (ctl_ == nullptr) return;
  // A restarted hook in a process that ran windows before (not possible
  // today, the ring is per process) would start from the daemon's last id.
  last_req_id_ = static_cast<uint32_t>(__atomic_load_n(&ctl_->ack, __ATOMIC_ACQUIRE) >> 32);
  __atomic_store_n(&ctl_->hook_magic, XPU_RING_PROFILE_MAGIC, __ATOMIC_RELEASE);
}

void CuptiWindow::Ack(uint32_t req_id, uint32_t status, int32_t detail) {
  if (ctl_ == nullptr) return;
  // Plain fields first, `ack` last with release (ring.h).
  __atomic_store_n(&ctl_->records, records_.load(std::memory_order_relaxed), __ATOMIC_RELAXED);
  __atomic_store_n(&ctl_->dropped, dropped_.load(std::memory_order_relaxed), __ATOMIC_RELAXED);
  __atomic_store_n(&ctl_->detail, detail, __ATOMIC_RELAXED);
  __atomic_store_n(&ctl_->windows_total, windows_total_, __ATOMIC_RELAXED);
  uint64_t ack = (uint64_t{req_id} << 32) | status;
  __atomic_store_n(&ctl_->ack, ack, __ATOMIC_RELEASE);
  if (status >= XPU_PROFILE_DONE) last_req_id_ = req_id;
}

void CuptiWindow::Tick(uint64_t now, const void* cudart_anchor) {
  if (ctl_ == nullptr) return;
  switch (state_) {
    case State::kIdle: {
      if (now < next_poll_ns_) return;
      next_poll_ns_ = now + options_.poll_ns;
      // Sequence-checked copy of the daemon's request (ring.h).
      uint32_t id = __atomic_load_n(&ctl_->req_id, __ATOMIC_ACQUIRE);
      if (id == 0 || id == last_req_id_) return;
      uint32_t duration_ms = __atomic_load_n(&ctl_->req_duration_ms, __ATOMIC_RELAXED);
      uint32_t max_records = __atomic_load_n(&ctl_->req_max_records, __ATOMIC_RELAXED);
      if (__atomic_load_n(&ctl_->req_id, __ATOMIC_ACQUIRE) != id) return;  // being rewritten
      records_.store(0, std::memory_order_relaxed);
      dropped_.store(0, std::memory_order_relaxed);
      __atomic_store_n(&ctl_->flags, 0u, __ATOMIC_RELAXED);
      __atomic_store_n(&ctl_->window_start_ns, uint64_t{0}, __ATOMIC_RELAXED);
      __atomic_store_n(&ctl_->window_end_ns, uint64_t{0}, __ATOMIC_RELAXED);
      if (duration_ms == 0 || duration_ms > XPU_PROFILE_MAX_DURATION_MS) {
        Ack(id, XPU_PROFILE_REJECTED, 0);
        return;
      }
      if (!options_.enabled) {
        Ack(id, XPU_PROFILE_SKIPPED_UNAVAILABLE, kDetailDisabled);
        return;
      }
      int32_t detail = 0;
      if (!LoadApi(cudart_anchor, &detail)) {
        Ack(id, XPU_PROFILE_SKIPPED_UNAVAILABLE, detail);
        return;
      }
      uint32_t cap = options_.max_records;
      if (max_records != 0) cap = std::min(cap, max_records);
      Start(id, duration_ms, cap, now);
      return;
    }
    case State::kRunning:
      if (now >= end_at_ns_) EndActivity(now);
      return;
    case State::kDetaching: {
      uint32_t d = detach_.load(std::memory_order_acquire);
      if (d == kDetachDone) {
        Finish(now);
        return;
      }
      if (now < detach_deadline_ns_) return;
      // No runtime API call reached its exit since the window ended: the
      // process is idle, finalizing from here cannot race a CUDA call.
      uint32_t armed = kDetachArmed;
      if (detach_.compare_exchange_strong(armed, kDetachClaimed, std::memory_order_acq_rel)) {
        api_.enable_domain(0, subscriber_, cupti::kCbDomainRuntimeApi);
        api_.unsubscribe(subscriber_);
        finalize_result_.store(api_.finalize(), std::memory_order_relaxed);
        detach_.store(kDetachDone, std::memory_order_release);
        Finish(now);
      }
      // Claimed by a callback that is finalizing right now: next tick.
      return;
    }
  }
}

bool CuptiWindow::LoadApi(const void* cudart_anchor, int32_t* detail) {
  if (api_loaded_) return true;
  std::vector<std::string> candidates;
  // A CUPTI the process already loaded comes first: a second copy of CUPTI
  // in one process would fight the first over the driver's callbacks.
  for (const char* soname : {"libcupti.so.13", "libcupti.so"}) {
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD)) {
      Dl_info info{};
      void* sym = dlsym(h, "cuptiSubscribe");
      if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
        candidates.push_back(info.dli_fname);
      } else {
        candidates.push_back(soname);
      }
      dlclose(h);  // drops only the reference NOLOAD added
    }
  }
  if (!options_.cupti_path.empty()) {
    const std::string& p = options_.cupti_path;
    const bool is_file = (p.size() >= 3 && p.compare(p.size() - 3, 3, ".so") == 0) ||
                         p.find(".so.") != std::string::npos;
    if (!is_file) {
      candidates.push_back(p + "/libcupti.so.13");
      candidates.push_back(p + "/libcupti.so");
    } else {
      candidates.push_back(p);
    }
  }
  Dl_info info{};
  if (cudart_anchor != nullptr && dladdr(cudart_anchor, &info) != 0 && info.dli_fname != nullptr &&
      strchr(info.dli_fname, '/') != nullptr) {
    const std::string dir = DirName(info.dli_fname);
    // Same directory (nvidia/cu13/lib wheels put everything together), the
    // per-component wheels (nvidia/cuda_runtime/lib -> nvidia/cuda_cupti/lib),
    // and the toolkit (lib64 -> extras/CUPTI/lib64).
    for (const char* rel :
         {"", "/../../cuda_cupti/lib", "/../../cu13/lib", "/../extras/CUPTI/lib64"}) {
      candidates.push_back(dir + rel + "/libcupti.so.13");
      candidates.push_back(dir + rel + "/libcupti.so");
    }
  }
  candidates.push_back("libcupti.so.13");
  candidates.push_back("libcupti.so");

  *detail = kDetailNoLibrary;
  for (const std::string& c : candidates) {
    void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) continue;
    cupti::Api a;
    Resolve(h, "cuptiSubscribe", &a.subscribe);
    Resolve(h, "cuptiUnsubscribe", &a.unsubscribe);
    Resolve(h, "cuptiEnableDomain", &a.enable_domain);
    Resolve(h, "cuptiActivityRegisterCallbacks", &a.activity_register_callbacks);
    Resolve(h, "cuptiActivityEnable", &a.activity_enable);
    Resolve(h, "cuptiActivityDisable", &a.activity_disable);
    Resolve(h, "cuptiActivityFlushAll", &a.activity_flush_all);
    Resolve(h, "cuptiActivityGetNextRecord", &a.activity_get_next_record);
    Resolve(h, "cuptiActivityGetNumDroppedRecords", &a.activity_get_num_dropped_records);
    Resolve(h, "cuptiGetTimestamp", &a.get_timestamp);
    Resolve(h, "cuptiFinalize", &a.finalize);
    if (!a.Complete()) {
      // Not unloaded: the loader may have run its constructors.
      *detail = kDetailSymbolMissing;
      continue;
    }
    Dl_info where{};
    library_ =
        (dladdr(reinterpret_cast<void*>(a.subscribe), &where) != 0 && where.dli_fname != nullptr)
            ? where.dli_fname
            : c;
    api_ = a;
    api_loaded_ = true;
    *detail = 0;
    return true;
  }
  return false;
}

bool CuptiWindow::AllocateBuffers() {
  if (!buffers_) buffers_.reset(new uint8_t*[64]());
  nbuffers_ = options_.max_buffers;
  uint64_t mask = 0;
  for (uint32_t i = 0; i < nbuffers_; ++i) {
    if (buffers_[i] == nullptr) {
      buffers_[i] = static_cast<uint8_t*>(
          aligned_alloc(cupti::kActivityRecordAlignment, options_.buffer_bytes));
    }
    if (buffers_[i] != nullptr) mask |= uint64_t{1} << i;
  }
  free_mask_.store(mask, std::memory_order_release);
  return mask != 0;
}

void CuptiWindow::FreeBuffers() {
  if (!buffers_) return;
  uint64_t mask = free_mask_.exchange(0, std::memory_order_acq_rel);
  for (uint32_t i = 0; i < nbuffers_; ++i) {
    if (buffers_[i] == nullptr) continue;
    if (mask & (uint64_t{1} << i)) {
      free(buffers_[i]);
      buffers_[i] = nullptr;
    } else {
      // CUPTI never handed it back; after cuptiFinalize it never will.
      // Leaked (bounded: one buffer per window at most in practice).
      Count(XPU_CNT_INTERNAL);
      buffers_[i] = nullptr;
    }
  }
}

bool CuptiWindow::SampleClockOffset(int64_t* offset_ns) {
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    uint64_t before = NowNs();
    uint64_t ts = 0;
    if (api_.get_timestamp(&ts) != cupti::kSuccess) return false;
    uint64_t after = NowNs();
    if (after - before < best_gap) {
      best_gap = after - before;
      *offset_ns = static_cast<int64_t>(before + (after - before) / 2) - static_cast<int64_t>(ts);
    }
  }
  return true;
}

void CuptiWindow::Start(uint32_t req_id, uint32_t duration_ms, uint32_t max_records, uint64_t now) {
  cur_req_id_ = req_id;
  cupti::SubscriberHandle sub = nullptr;
  cupti::Result r = api_.subscribe(&sub, &CuptiWindow::OnCallback, this);
  if (r == cupti::kErrorMultipleSubscribersNotSupported) {
    // Someone else (torch.profiler/Kineto, Nsight Systems/Compute, a
    // debugger) holds CUPTI: leave it entirely alone.
    Ack(req_id, XPU_PROFILE_SKIPPED_OTHER_CLIENT, r);
    return;
  }
  if (r != cupti::kSuccess) {
    Ack(req_id, XPU_PROFILE_SKIPPED_UNAVAILABLE, r);
    return;
  }
  subscriber_ = sub;
  // From here on CUPTI is initialised by us: every exit path releases it.
  auto abandon = [&](uint32_t status, int32_t detail) {
    api_.activity_disable(cupti::kActivityKindConcurrentKernel);
    api_.activity_flush_all(cupti::kActivityFlagFlushForced);
    api_.unsubscribe(subscriber_);
    cupti::Result fin = api_.finalize();
    subscriber_ = nullptr;
    FreeBuffers();
    if (fin == cupti::kSuccess) {
      __atomic_store_n(&ctl_->flags, uint32_t{XPU_PROFILE_FINALIZED}, __ATOMIC_RELAXED);
    }
    Ack(req_id, status, detail);
  };
  if (!AllocateBuffers()) {
    abandon(XPU_PROFILE_FAILED, kDetailNoBuffers);
    return;
  }
  int64_t offset = 0;
  if (!SampleClockOffset(&offset)) {
    abandon(XPU_PROFILE_FAILED, cupti::kErrorNotInitialized);
    return;
  }
  clock_offset_ns_.store(offset, std::memory_order_relaxed);
  max_records_.store(max_records, std::memory_order_relaxed);
  truncated_.store(0, std::memory_order_relaxed);
  detach_.store(kDetachOff, std::memory_order_relaxed);
  finalized_in_callback_.store(0, std::memory_order_relaxed);
  r = api_.activity_register_callbacks(&CuptiWindow::OnBufferRequested,
                                       &CuptiWindow::OnBufferCompleted);
  if (r == cupti::kSuccess) r = api_.activity_enable(cupti::kActivityKindConcurrentKernel);
  if (r != cupti::kSuccess) {
    abandon(XPU_PROFILE_FAILED, r);
    return;
  }
  ++windows_total_;
  const uint64_t started = NowNs();
  __atomic_store_n(&ctl_->window_start_ns, started, __ATOMIC_RELAXED);
  end_at_ns_ = now + uint64_t{duration_ms} * kMs;
  state_ = State::kRunning;
  Ack(req_id, XPU_PROFILE_STARTED, 0);
}

void CuptiWindow::EndActivity(uint64_t now) {
  api_.activity_disable(cupti::kActivityKindConcurrentKernel);
  // Hands every buffer back, on this thread: its kernels become records now.
  api_.activity_flush_all(cupti::kActivityFlagFlushForced);
  size_t lost = 0;
  if (api_.activity_get_num_dropped_records(nullptr, 0, &lost) == cupti::kSuccess && lost > 0) {
    dropped_.fetch_add(static_cast<uint32_t>(std::min<size_t>(lost, UINT32_MAX)),
                       std::memory_order_relaxed);
  }
  __atomic_store_n(&ctl_->window_end_ns, NowNs(), __ATOMIC_RELAXED);
  // Release CUPTI from the next runtime API exit (see the header).
  detach_.store(kDetachArmed, std::memory_order_release);
  if (api_.enable_domain(1, subscriber_, cupti::kCbDomainRuntimeApi) != cupti::kSuccess) {
    detach_deadline_ns_ = now;  // no callbacks: finalize from here at once
  } else {
    detach_deadline_ns_ = now + options_.detach_wait_ns;
  }
  state_ = State::kDetaching;
}

void CuptiWindow::Finish(uint64_t now) {
  if (finalize_result_.load(std::memory_order_relaxed) != cupti::kSuccess &&
      finalized_in_callback_.load(std::memory_order_relaxed)) {
    // cuptiFinalize refused from the callback (a platform without detach):
    // at least leave no callback and no subscriber behind, or every later
    // window would find "another client" (ourselves).
    api_.enable_domain(0, subscriber_, cupti::kCbDomainRuntimeApi);
    api_.unsubscribe(subscriber_);
  }
  subscriber_ = nullptr;
  FreeBuffers();
  uint32_t flags = 0;
  if (finalize_result_.load(std::memory_order_relaxed) == cupti::kSuccess)
    flags |= XPU_PROFILE_FINALIZED;
  if (finalized_in_callback_.load(std::memory_order_relaxed))
    flags |= XPU_PROFILE_FINALIZE_CALLBACK;
  if (truncated_.load(std::memory_order_relaxed)) flags |= XPU_PROFILE_TRUNCATED;
  __atomic_store_n(&ctl_->flags, flags, __ATOMIC_RELAXED);
  state_ = State::kIdle;
  next_poll_ns_ = now;
  Ack(cur_req_id_, XPU_PROFILE_DONE, 0);
}

uint32_t CuptiWindow::InternKernel(const char* name, uint32_t device) {
  xpu_signature_v1 sig;
  memset(&sig, 0, sizeof(sig));
  sig.kind = XPU_OP_KERNEL;
  sig.comm_rank = -1;
  sig.peer = -1;
  sig.device = static_cast<int32_t>(device);
  if (name == nullptr) name = "<unnamed kernel>";
  return sigs_->Intern(sig, name, strnlen(name, 4096));
}

void CuptiWindow::ProcessBuffer(uint8_t* buffer, size_t valid_size) {
  const int64_t offset = clock_offset_ns_.load(std::memory_order_relaxed);
  const uint32_t cap = max_records_.load(std::memory_order_relaxed);
  void* rec = nullptr;
  while (api_.activity_get_next_record(buffer, valid_size, &rec) == cupti::kSuccess &&
         rec != nullptr) {
    const uint8_t* p = static_cast<const uint8_t*>(rec);
    const uint32_t kind = ReadAt<uint32_t>(p, cupti::kKernelKindOffset);
    if (kind != cupti::kActivityKindConcurrentKernel && kind != cupti::kActivityKindKernel)
      continue;
    if (records_.load(std::memory_order_relaxed) >= cap) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      truncated_.store(1, std::memory_order_relaxed);
      continue;
    }
    const uint64_t start = ReadAt<uint64_t>(p, cupti::kKernelStartOffset);
    const uint64_t end = ReadAt<uint64_t>(p, cupti::kKernelEndOffset);
    const char* name = ReadAt<const char*>(p, cupti::kKernelNameOffset);
    uint32_t sig = InternKernel(name, ReadAt<uint32_t>(p, cupti::kKernelDeviceIdOffset));
    if (sig == 0 || start == 0 || end < start) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    xpu_record_v1 r{};
    r.sig_id = sig;
    const int64_t host = static_cast<int64_t>(start) + offset;
    r.start_ns = host > 0 ? static_cast<uint64_t>(host) : 0;
    uint16_t flags = XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW;
    r.duration = EncodeDuration(end - start, &flags);
    r.seq = ReadAt<uint32_t>(p, cupti::kKernelCorrelationIdOffset);
    const uint32_t stream = ReadAt<uint32_t>(p, cupti::kKernelStreamIdOffset);
    r.stream = static_cast<uint16_t>(std::min<uint32_t>(stream, 65535));
    r.flags = flags;
    if (ring_->Write(r)) {
      records_.fetch_add(1, std::memory_order_relaxed);
    } else {
      dropped_.fetch_add(1, std::memory_order_relaxed);  // ring full, counted there too
    }
  }
}

void CuptiWindow::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_num_records) {
  *buffer = nullptr;
  *size = 0;
  *max_num_records = 0;
  CuptiWindow* w = g_window.load(std::memory_order_acquire);
  if (w == nullptr) return;
  uint64_t mask = w->free_mask_.load(std::memory_order_acquire);
  while (mask != 0) {
    const int i = __builtin_ctzll(mask);
    if (w->free_mask_.compare_exchange_weak(mask, mask & ~(uint64_t{1} << i),
                                            std::memory_order_acq_rel)) {
      *buffer = w->buffers_[i];
      *size = w->options_.buffer_bytes;
      return;
    }
  }
  // Every buffer is with CUPTI: it drops records and counts them, which the
  // window reads at its end.
}

void CuptiWindow::OnBufferCompleted(void* context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                    size_t valid_size) {
  CuptiWindow* w = g_window.load(std::memory_order_acquire);
  if (w == nullptr || buffer == nullptr) return;
  if (valid_size > 0) w->ProcessBuffer(buffer, valid_size);
  for (uint32_t i = 0; i < w->nbuffers_; ++i) {
    if (w->buffers_[i] == buffer) {
      w->free_mask_.fetch_or(uint64_t{1} << i, std::memory_order_acq_rel);
      return;
    }
  }
}

void CuptiWindow::OnCallback(void* userdata, cupti::CallbackDomain domain, cupti::CallbackId cbid,
                             const void* cbdata) {
  auto* w = static_cast<CuptiWindow*>(userdata);
  if (w == nullptr || domain != cupti::kCbDomainRuntimeApi || cbdata == nullptr) return;
  int site = 0;
  memcpy(&site, static_cast<const uint8_t*>(cbdata) + cupti::kCallbackDataSiteOffset, sizeof(site));
  if (site != cupti::kApiExit) return;
  uint32_t armed = kDetachArmed;
  if (w->detach_.load(std::memory_order_relaxed) != kDetachArmed ||
      !w->detach_.compare_exchange_strong(armed, kDetachClaimed, std::memory_order_acq_rel)) {
    return;
  }
  // The exit of a runtime API call on an application thread: the point at
  // which CUPTI documents cuptiFinalize as safe. Runs once per window.
  w->finalize_result_.store(w->api_.finalize(), std::memory_order_relaxed);
  w->finalized_in_callback_.store(1, std::memory_order_relaxed);
  w->detach_.store(kDetachDone, std::memory_order_release);
}

}  // namespace xpu::hook
