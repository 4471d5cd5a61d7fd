// tests/fake_runtime/fake_event.cc — events as timestamps: a record is a
// stream op that stamps CLOCK_REALTIME when the worker reaches it; waits
// (host or stream) block until the stamp of the wanted record exists.
//
// Thread-safety: the event registry is guarded by a mutex; an event's
// generation counters and stamp are atomics (stamp stored before the
// generation with release order); completion is announced on one
// process-wide condition variable.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <unordered_set>

#include "fake_core.h"

namespace xpu::fake {

namespace {
std::mutex& EventMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::condition_variable& EventCv() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

struct Event {
  unsigned flags = 0;
  std::atomic<uint64_t> record_gen{0};  // host: bumped by each record
  std::atomic<uint64_t> done_gen{0};    // worker: gen of the last stamp reached
  std::atomic<uint64_t> stamp_ns{0};    // worker: stored before done_gen
};
std::mutex& EventRegMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<Event*>& Events() {
  static auto* s = new std::unordered_set<Event*>;
  return *s;
}
// Events are never freed: a stale handle then reads as unknown instead of
// touching freed memory, and a destroyed event may still be referenced by a
// queued op (CUDA allows destroying an event with pending records).
Event* FindEvent(const void* handle) {
  std::lock_guard<std::mutex> lock(EventRegMu());
  auto* e = static_cast<Event*>(const_cast<void*>(handle));
  return Events().count(e) ? e : nullptr;
}
}  // namespace

cudaError_t CreateEvent(unsigned flags, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  auto* e = new Event;
  e->flags = flags;
  std::lock_guard<std::mutex> lock(EventRegMu());
  Events().insert(e);
  *out = e;
  return cudaSuccess;
}

cudaError_t DestroyEvent(const void* event) {
  std::lock_guard<std::mutex> lock(EventRegMu());
  auto* e = static_cast<Event*>(const_cast<void*>(event));
  if (!Events().erase(e)) return cudaErrorInvalidResourceHandle;
  return cudaSuccess;  // leaked on purpose, see FindEvent
}

cudaError_t RecordEvent(const void* event, Stream* s) {
  Event* e = FindEvent(event);
  if (e == nullptr || s == nullptr) return cudaErrorInvalidResourceHandle;
  if (IsCapturing(s, nullptr)) return cudaSuccess;  // single-stream capture model
  uint64_t gen = e->record_gen.fetch_add(1) + 1;
  return Enqueue(s, [e, gen] {
    e->stamp_ns.store(NowNs(), std::memory_order_relaxed);
    e->done_gen.store(gen, std::memory_order_release);
    std::lock_guard<std::mutex> lock(EventMu());
    EventCv().notify_all();
  });
}

cudaError_t QueryEvent(const void* event) {
  Event* e = FindEvent(event);
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  return e->done_gen.load(std::memory_order_acquire) >= e->record_gen.load() ? cudaSuccess
                                                                             : cudaErrorNotReady;
}

cudaError_t SynchronizeEvent(const void* event) {
  Event* e = FindEvent(event);
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  uint64_t target = e->record_gen.load();
  std::unique_lock<std::mutex> lock(EventMu());
  EventCv().wait(lock, [e, target] { return e->done_gen.load() >= target; });
  return cudaSuccess;
}

cudaError_t ElapsedMs(const void* start, const void* end, float* ms) {
  if (ms == nullptr) return cudaErrorInvalidValue;
  Event* a = FindEvent(start);
  Event* b = FindEvent(end);
  if (a == nullptr || b == nullptr) return cudaErrorInvalidResourceHandle;
  if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
  if (a->record_gen.load() == 0 || b->record_gen.load() == 0) {
    return cudaErrorInvalidResourceHandle;  // never recorded, as in CUDA
  }
  if (QueryEvent(a) != cudaSuccess || QueryEvent(b) != cudaSuccess) return cudaErrorNotReady;
  int64_t d = static_cast<int64_t>(b->stamp_ns.load()) - static_cast<int64_t>(a->stamp_ns.load());
  *ms = static_cast<float>(static_cast<double>(d) / 1e6);
  return cudaSuccess;
}

cudaError_t StreamWaitEvent(Stream* s, const void* event) {
  Event* e = FindEvent(event);
  if (e == nullptr || s == nullptr) return cudaErrorInvalidResourceHandle;
  if (IsCapturing(s, nullptr)) return cudaSuccess;  // single-stream capture model
  uint64_t target = e->record_gen.load();
  if (target == 0) return cudaSuccess;  // never recorded: no dependency
  return Enqueue(s, [e, target] {
    std::unique_lock<std::mutex> lock(EventMu());
    EventCv().wait(lock, [e, target] { return e->done_gen.load() >= target; });
  });
}

uint64_t EventStampNs(const void* event) {
  Event* e = FindEvent(event);
  if (e == nullptr || e->done_gen.load(std::memory_order_acquire) == 0) return 0;
  return e->stamp_ns.load();
}

}  // namespace xpu::fake
