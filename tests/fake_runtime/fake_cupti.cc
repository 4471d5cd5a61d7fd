// tests/fake_runtime/fake_cupti.cc — a test double of libcupti.so.13 for the
// GPU-less runtime: the part of CUPTI that XPUTimer's profiling window uses
// (hook/tracing/cupti_window.h), built against the real CUPTI headers so that its
// records have the real layout (CUpti_ActivityKernel10).
//
// Model:
// - cuptiSubscribe: one subscriber at a time; a second one, or any with
//   XPU_FAKE_CUPTI_OTHER_CLIENT=1 (another client such as torch.profiler or
//   Nsight holds CUPTI), gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.
// - XPU_FAKE_CUPTI_FINALIZE_FAILS=1: cuptiFinalize answers
//   CUPTI_ERROR_NOT_SUPPORTED and tears nothing down (a platform without
//   detach).
// - cuptiActivityEnable(CONCURRENT_KERNEL or KERNEL) installs a kernel
//   observer in the fake runtime (fake_core.h): every kernel that ends,
//   NCCL's included, becomes one CUpti_ActivityKernel10 in the current
//   buffer (requested from the client when needed; none given = the record
//   is dropped and counted). A full buffer is handed back from the stream's
//   worker thread; cuptiActivityFlushAll hands back the partial one on the
//   calling thread.
// - Timestamps are CLOCK_MONOTONIC ns (cuptiGetTimestamp too), not the host
//   clock of the records, so that a client that forgets to convert shows.
// - cuptiEnableDomain(RUNTIME_API) calls the subscriber's callback with
//   callbackSite CUPTI_API_EXIT whenever a runtime API function (cuda*)
//   returns.
// - cuptiFinalize drops everything: observer, API hook, subscriber,
//   callbacks, enabled kinds. It is counted.
// - XPU_FAKE_CUPTI_STATE=PREFIX: after every cuptiFinalize and at exit the
//   state is written to PREFIX.rank<RANK> (PREFIX.pid<PID> without RANK),
//   one "key value" per line (see WriteState); the same values are returned
//   by xpu_fake_cupti_counter(key).
//
// Thread-safety: every entry point is thread-safe. Client callbacks are
// called without the library's lock held (a client may call back in, e.g.
// cuptiFinalize from a runtime-API callback).
#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "fake_core.h"

namespace fk = xpu::fake;

namespace {

struct State {
  std::mutex mu;
  // Guarded by mu.
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  bool runtime_domain = false;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  bool kernel_kind = false;
  uint8_t* buffer = nullptr;  // current buffer, owned by the client
  size_t size = 0;
  size_t used = 0;
  size_t max_records = 0;
  size_t in_buffer = 0;
  size_t dropped = 0;  // since the last cuptiActivityGetNumDroppedRecords
  // Counters for tests (monotonic).
  uint64_t subscribe_calls = 0;
  uint64_t subscribe_refused = 0;
  uint64_t finalize_calls = 0;
  uint64_t finalize_in_callback = 0;
  uint64_t records_emitted = 0;
  uint64_t records_dropped = 0;
  uint64_t buffers_completed = 0;
  uint64_t enable_calls = 0;
};

State& S() {
  static auto* s = new State;  // never destroyed: workers may report at exit
  return *s;
}

thread_local int t_in_callback = 0;
const int64_t g_mono_minus_real = [] {
  timespec m, r;
  clock_gettime(CLOCK_MONOTONIC, &m);
  clock_gettime(CLOCK_REALTIME, &r);
  return (int64_t{m.tv_sec} - int64_t{r.tv_sec}) * 1000000000ll + (m.tv_nsec - r.tv_nsec);
}();

uint64_t ToCuptiClock(uint64_t realtime_ns) {
  return static_cast<uint64_t>(static_cast<int64_t>(realtime_ns) + g_mono_minus_real);
}

bool EnvFlag(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' && strcmp(v, "0") != 0;
}

uint64_t Counter(const State& s, const std::string& key) {
  if (key == "subscribe_calls") return s.subscribe_calls;
  if (key == "subscribe_refused") return s.subscribe_refused;
  if (key == "finalize_calls") return s.finalize_calls;
  if (key == "finalize_in_callback") return s.finalize_in_callback;
  if (key == "records_emitted") return s.records_emitted;
  if (key == "records_dropped") return s.records_dropped;
  if (key == "buffers_completed") return s.buffers_completed;
  if (key == "enable_calls") return s.enable_calls;
  if (key == "subscribed") return s.subscribed;
  if (key == "kernel_kind_enabled") return s.kernel_kind;
  if (key == "runtime_callbacks") return s.runtime_domain;
  if (key == "buffer_callbacks") return s.requested != nullptr;
  return ~0ull;
}

const char* const kKeys[] = {"subscribe_calls",      "subscribe_refused", "finalize_calls",
                             "finalize_in_callback", "records_emitted",   "records_dropped",
                             "buffers_completed",    "enable_calls",      "subscribed",
                             "kernel_kind_enabled",  "runtime_callbacks", "buffer_callbacks"};

void WriteState() {
  const char* prefix = getenv("XPU_FAKE_CUPTI_STATE");
  if (prefix == nullptr || *prefix == '\0') return;
  const char* rank = getenv("RANK");
  std::string path = std::string(prefix) +
                     (rank ? std::string(".rank") + rank : ".pid" + std::to_string(getpid()));
  std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    for (const char* k : kKeys)
      fprintf(f, "%s %llu\n", k, static_cast<unsigned long long>(Counter(S(), k)));
  }
  if (fclose(f) == 0) rename(tmp.c_str(), path.c_str());
}

// Takes the current buffer out (under the lock) for delivery outside it.
struct Delivery {
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  uint8_t* buffer = nullptr;
  size_t size = 0;
  size_t used = 0;
};
Delivery TakeBufferLocked(State& s) {
  Delivery d{s.completed, s.buffer, s.size, s.used};
  if (s.buffer != nullptr) ++s.buffers_completed;
  s.buffer = nullptr;
  s.size = s.used = s.in_buffer = 0;
  return d;
}
void Deliver(const Delivery& d) {
  if (d.completed != nullptr && d.buffer != nullptr)
    d.completed(nullptr, 0, d.buffer, d.size, d.used);
}

bool NoRoomLocked(const State& s) {
  return s.buffer == nullptr || s.used + sizeof(CUpti_ActivityKernel10) > s.size ||
         (s.max_records != 0 && s.in_buffer >= s.max_records);
}

void OnKernel(const fk::KernelActivity& a) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.kernel_kind) return;
  if (NoRoomLocked(s)) {
    // Hand the full buffer back and ask for a fresh one, both without the
    // lock (the client may call back in).
    Delivery full = TakeBufferLocked(s);
    CUpti_BuffersCallbackRequestFunc requested = s.requested;
    lock.unlock();
    Deliver(full);
    uint8_t* fresh = nullptr;
    size_t fresh_size = 0, fresh_max = 0;
    if (requested != nullptr) requested(&fresh, &fresh_size, &fresh_max);
    lock.lock();
    if (fresh != nullptr) {
      if (s.kernel_kind && s.buffer == nullptr) {
        s.buffer = fresh;
        s.size = fresh_size;
        s.max_records = fresh_max;
      } else {
        // Another worker installed one meanwhile, or the kind was disabled:
        // this one goes straight back, empty.
        Delivery back{s.completed, fresh, fresh_size, 0};
        ++s.buffers_completed;
        lock.unlock();
        Deliver(back);
        lock.lock();
      }
    }
    if (!s.kernel_kind) return;
    if (NoRoomLocked(s)) {
      ++s.dropped;
      ++s.records_dropped;
      return;
    }
  }
  CUpti_ActivityKernel10 k;
  memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = ToCuptiClock(a.start_ns);
  k.end = ToCuptiClock(a.end_ns);
  k.completed = k.end;
  k.deviceId = static_cast<uint32_t>(a.device);
  k.contextId = 1;
  k.streamId = a.stream_id;
  k.gridX = k.gridY = k.gridZ = 1;
  k.blockX = k.blockY = k.blockZ = 1;
  k.correlationId = a.correlation_id;
  k.name = a.name != nullptr ? a.name : "xpu_fake_unknown_kernel";
  memcpy(s.buffer + s.used, &k, sizeof(k));
  s.used += sizeof(k);
  ++s.in_buffer;
  ++s.records_emitted;
}

void OnApiExit(const char* api) {
  if (api == nullptr || strncmp(api, "cuda", 4) != 0) return;  // runtime API only
  CUpti_CallbackFunc cb = nullptr;
  void* user = nullptr;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    if (!S().runtime_domain) return;
    cb = S().callback;
    user = S().userdata;
  }
  if (cb == nullptr) return;
  CUpti_CallbackData data;
  memset(&data, 0, sizeof(data));
  data.callbackSite = CUPTI_API_EXIT;
  data.functionName = api;
  ++t_in_callback;
  cb(user, CUPTI_CB_DOMAIN_RUNTIME_API, 0, &data);
  --t_in_callback;
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      break;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* userdata) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  static std::once_flag once;
  std::call_once(once, [] { atexit(WriteState); });
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().subscribe_calls;
  if (S().subscribed || EnvFlag("XPU_FAKE_CUPTI_OTHER_CLIENT")) {
    ++S().subscribe_refused;
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  S().subscribed = true;
  S().callback = callback;
  S().userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&S());
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!S().subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&S())) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  S().subscribed = false;
  S().callback = nullptr;
  S().userdata = nullptr;
  S().runtime_domain = false;
  fk::SetApiExitHook(nullptr);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!S().subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&S())) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return CUPTI_SUCCESS;  // nothing else is modelled
  S().runtime_domain = enable != 0;
  fk::SetApiExitHook(enable != 0 ? &OnApiExit : nullptr);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr)
    return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(S().mu);
  S().requested = funcBufferRequested;
  S().completed = funcBufferCompleted;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  ++S().enable_calls;
  if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL) {
    return CUPTI_ERROR_NOT_COMPATIBLE;
  }
  if (S().requested == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  S().kernel_kind = true;
  fk::SetKernelObserver(&OnKernel);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    S().kernel_kind = false;
    fk::SetKernelObserver(nullptr);
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  Delivery d;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    d = TakeBufferLocked(S());
  }
  Deliver(d);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity** record) {
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  uint8_t* next = *record == nullptr
                      ? buffer
                      : reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityKernel10);
  if (next + sizeof(CUpti_ActivityKernel10) > buffer + validBufferSizeBytes) {
    return CUPTI_ERROR_MAX_LIMIT_REACHED;
  }
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                       size_t* dropped) {
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(S().mu);
  *dropped = S().dropped;
  S().dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *timestamp = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void) {
  {
    std::lock_guard<std::mutex> lock(S().mu);
    State& s = S();
    ++s.finalize_calls;
    if (t_in_callback > 0) ++s.finalize_in_callback;
    // A platform where CUPTI cannot detach: nothing is torn down.
    if (EnvFlag("XPU_FAKE_CUPTI_FINALIZE_FAILS")) return CUPTI_ERROR_NOT_SUPPORTED;
    s.subscribed = false;
    s.callback = nullptr;
    s.userdata = nullptr;
    s.runtime_domain = false;
    s.kernel_kind = false;
    s.requested = nullptr;
    s.completed = nullptr;
    // A buffer still held is abandoned, as CUPTI does on detach.
    s.buffer = nullptr;
    s.size = s.used = s.in_buffer = 0;
    fk::SetKernelObserver(nullptr);
    fk::SetApiExitHook(nullptr);
  }
  WriteState();
  return CUPTI_SUCCESS;
}

// Test hook: the value of one state key (see kKeys), ~0 for an unknown key.
__attribute__((visibility("default"))) unsigned long long xpu_fake_cupti_counter(const char* key) {
  std::lock_guard<std::mutex> lock(S().mu);
  return Counter(S(), key == nullptr ? "" : key);
}

}  // extern "C"
