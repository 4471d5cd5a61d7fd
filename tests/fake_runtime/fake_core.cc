// tests/fake_runtime/fake_core.cc — streams as worker threads, events as
// timestamps, graphs as recorded op lists, kernels as timed sleeps. See
// fake_core.h for the model.
//
// Thread-safety: the registries (streams, events, graphs, functions, memory)
// are guarded by one mutex each; a stream's queue by the stream's mutex; event
// completion is published with atomics and announced on a process-wide
// condition variable that event waiters (host or stream ops) wait on.
#include "fake_core.h"

#include <dlfcn.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

extern "C" __attribute__((visibility("default"))) void xpu_fake_kernel(void) {}

namespace xpu::fake {
namespace {

// Spinning is reserved for the tail of a wait: on a loaded machine a long
// spin would steal the core from the ranks we model.
constexpr uint64_t kSpinNs = 50000;

double EnvDouble(const char* name, double def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  double d = strtod(v, &end);
  return (end != v && d > 0) ? d : def;
}

std::vector<int> EnvIntList(const char* name) {
  std::vector<int> out;
  const char* v = getenv(name);
  if (v == nullptr) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(atoi(item.c_str()));
  }
  return out;
}

Config ReadConfig() {
  Config c;
  c.devices = static_cast<int>(EnvDouble("XPU_FAKE_DEVICES", 1));
  if (c.devices < 1) c.devices = 1;
  c.kernel_ns = static_cast<uint64_t>(EnvDouble("XPU_FAKE_KERNEL_NS", 20000));
  c.tflops = EnvDouble("XPU_FAKE_TFLOPS", 100.0);
  c.net_gbps = EnvDouble("XPU_FAKE_NET_GBPS", 100.0);
  const char* r = getenv("RANK");
  c.rank = r ? atoi(r) : -1;
  const char* lr = getenv("LOCAL_RANK");
  c.local_rank = lr ? atoi(lr) : -1;
  for (int s : EnvIntList("XPU_FAKE_SLOW_RANKS")) {
    if (s == c.rank) c.slow_gemm_factor = EnvDouble("XPU_FAKE_SLOW_GEMM_FACTOR", 2.0);
  }
  c.slow_link_ranks = EnvIntList("XPU_FAKE_SLOW_LINK_RANKS");
  c.slow_link_factor = EnvDouble("XPU_FAKE_SLOW_LINK_FACTOR", 2.0);
  return c;
}

Config* g_config = nullptr;
std::once_flag g_config_once;

// Process-wide announcement of event completion.
std::mutex& EventMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::condition_variable& EventCv() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

}  // namespace

const Config& GetConfig() {
  std::call_once(g_config_once, [] { g_config = new Config(ReadConfig()); });
  return *g_config;
}

void ReloadConfigForTesting() {
  GetConfig();
  *g_config = ReadConfig();
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUntilNs(uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = NowNs();
    if (now >= deadline_ns) return;
    uint64_t left = deadline_ns - now;
    if (left > kSpinNs) {
      uint64_t wake = deadline_ns - kSpinNs;
      timespec ts{static_cast<time_t>(wake / 1000000000ull),
                  static_cast<long>(wake % 1000000000ull)};
      clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr);
    }
  }
}

uint64_t GemmDurationNs(uint64_t m, uint64_t n, uint64_t k, uint64_t batch) {
  const Config& c = GetConfig();
  double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) *
                 static_cast<double>(k) * static_cast<double>(batch ? batch : 1);
  double ns = flops / (c.tflops * 1e12) * 1e9 * c.slow_gemm_factor;
  return static_cast<uint64_t>(ns);
}

// ---------------------------------------------------------------------------
// Streams.

struct Graph {
  std::vector<Op> ops;
};

struct Stream {
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  bool legacy = false;
  std::mutex mu;
  std::condition_variable work_cv;  // worker waits for ops
  std::condition_variable done_cv;  // host waits for completion
  std::deque<Op> queue;
  uint64_t submitted = 0;  // guarded by mu
  uint64_t completed = 0;  // guarded by mu
  bool closing = false;    // guarded by mu: worker exits once drained
  Graph* capture = nullptr;            // guarded by mu
  unsigned long long capture_id = 0;   // guarded by mu
};

namespace {

std::mutex& RegMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<Stream*>& Streams() {
  static auto* s = new std::unordered_set<Stream*>;
  return *s;
}
std::vector<Stream*>& LegacyStreams() {  // guarded by RegMu, one per device
  static auto* v = new std::vector<Stream*>;
  return *v;
}
std::atomic<unsigned long long> g_capture_ids{0};

thread_local int t_device = 0;

void WorkerLoop(Stream* s) {
  // Model timing precision: default timer slack (50 us) would blur short
  // kernels.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->work_cv.wait(lock, [s] { return !s->queue.empty() || s->closing; });
    if (s->queue.empty()) break;  // closing and drained
    Op op = std::move(s->queue.front());
    s->queue.pop_front();
    lock.unlock();
    op();
    lock.lock();
    ++s->completed;
    s->done_cv.notify_all();
  }
  lock.unlock();
  delete s;  // destroyed streams are unreachable: removed from the registry
}

Stream* StartStream(int device, unsigned flags, int priority, bool legacy) {
  auto* s = new Stream;
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  s->legacy = legacy;
  std::thread(WorkerLoop, s).detach();
  return s;
}

}  // namespace

int CurrentDevice() { return t_device; }

cudaError_t SetCurrentDevice(int device) {
  if (device < 0 || device >= GetConfig().devices) return cudaErrorInvalidDevice;
  t_device = device;
  return cudaSuccess;
}

Stream* ResolveStream(const void* handle) {
  std::lock_guard<std::mutex> lock(RegMu());
  if (handle == nullptr || handle == reinterpret_cast<const void*>(cudaStreamLegacy) ||
      handle == reinterpret_cast<const void*>(cudaStreamPerThread)) {
    auto& legacy = LegacyStreams();
    int dev = t_device;
    if (legacy.size() <= static_cast<size_t>(dev)) legacy.resize(dev + 1, nullptr);
    if (legacy[dev] == nullptr) {
      legacy[dev] = StartStream(dev, 0, 0, true);
      Streams().insert(legacy[dev]);
    }
    return legacy[dev];
  }
  auto* s = static_cast<Stream*>(const_cast<void*>(handle));
  return Streams().count(s) ? s : nullptr;
}

cudaError_t CreateStream(unsigned flags, int priority, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  Stream* s = StartStream(t_device, flags, priority, false);
  std::lock_guard<std::mutex> lock(RegMu());
  Streams().insert(s);
  *out = s;
  return cudaSuccess;
}

cudaError_t DestroyStream(const void* handle) {
  Stream* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(RegMu());
    auto* p = static_cast<Stream*>(const_cast<void*>(handle));
    if (handle == nullptr || !Streams().count(p) || p->legacy) {
      return cudaErrorInvalidResourceHandle;
    }
    Streams().erase(p);
    s = p;
  }
  // Like CUDA: returns at once; the worker finishes queued work, then frees.
  std::lock_guard<std::mutex> lock(s->mu);
  s->closing = true;
  s->work_cv.notify_all();
  return cudaSuccess;
}

cudaError_t Enqueue(Stream* s, Op op) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture != nullptr) {
    s->capture->ops.push_back(std::move(op));
    return cudaSuccess;
  }
  s->queue.push_back(std::move(op));
  ++s->submitted;
  s->work_cv.notify_one();
  return cudaSuccess;
}

cudaError_t EnqueueKernel(Stream* s, uint64_t duration_ns) {
  return Enqueue(s, [duration_ns] { SleepUntilNs(NowNs() + duration_ns); });
}

cudaError_t SynchronizeStream(Stream* s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  std::unique_lock<std::mutex> lock(s->mu);
  if (s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;
  uint64_t target = s->submitted;
  s->done_cv.wait(lock, [s, target] { return s->completed >= target; });
  return cudaSuccess;
}

cudaError_t QueryStream(Stream* s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  std::lock_guard<std::mutex> lock(s->mu);
  return s->completed >= s->submitted ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t SynchronizeDevice() {
  std::vector<Stream*> mine;
  {
    std::lock_guard<std::mutex> lock(RegMu());
    for (Stream* s : Streams()) {
      if (s->device == t_device) mine.push_back(s);
    }
  }
  // A stream destroyed meanwhile is still alive until drained; a destroyed
  // and drained one is gone, so re-resolve each before waiting.
  for (Stream* s : mine) {
    if (ResolveStream(s) == s) SynchronizeStream(s);
  }
  return cudaSuccess;
}

int StreamDevice(const Stream* s) { return s->device; }

void StreamFlags(const Stream* s, unsigned* flags, int* priority) {
  if (flags) *flags = s->flags;
  if (priority) *priority = s->priority;
}

// ---------------------------------------------------------------------------
// Capture and graphs.

namespace {
struct GraphExec {
  std::vector<Op> ops;
};
std::unordered_set<Graph*>& Graphs() {
  static auto* s = new std::unordered_set<Graph*>;
  return *s;
}
std::unordered_set<GraphExec*>& Execs() {
  static auto* s = new std::unordered_set<GraphExec*>;
  return *s;
}
}  // namespace

cudaError_t BeginCapture(Stream* s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  // Capturing the legacy stream is illegal in CUDA too.
  if (s->legacy) return cudaErrorStreamCaptureUnsupported;
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture != nullptr) return cudaErrorIllegalState;
  s->capture = new Graph;
  s->capture_id = ++g_capture_ids;
  return cudaSuccess;
}

cudaError_t EndCapture(Stream* s, void** graph_out) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  if (graph_out == nullptr) return cudaErrorInvalidValue;
  Graph* g = nullptr;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture == nullptr) return cudaErrorIllegalState;
    g = s->capture;
    s->capture = nullptr;
    s->capture_id = 0;
  }
  std::lock_guard<std::mutex> lock(RegMu());
  Graphs().insert(g);
  *graph_out = g;
  return cudaSuccess;
}

bool IsCapturing(Stream* s, unsigned long long* id) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (id) *id = s->capture_id;
  return s->capture != nullptr;
}

cudaError_t InstantiateGraph(const void* graph, void** exec_out) {
  if (exec_out == nullptr) return cudaErrorInvalidValue;
  std::lock_guard<std::mutex> lock(RegMu());
  auto* g = static_cast<Graph*>(const_cast<void*>(graph));
  if (!Graphs().count(g)) return cudaErrorInvalidResourceHandle;
  auto* e = new GraphExec{g->ops};
  Execs().insert(e);
  *exec_out = e;
  return cudaSuccess;
}

cudaError_t LaunchGraph(const void* exec, Stream* s) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  std::vector<Op> ops;
  {
    std::lock_guard<std::mutex> lock(RegMu());
    auto* e = static_cast<GraphExec*>(const_cast<void*>(exec));
    if (!Execs().count(e)) return cudaErrorInvalidResourceHandle;
    ops = e->ops;
  }
  for (Op& op : ops) Enqueue(s, std::move(op));
  return cudaSuccess;
}

cudaError_t DestroyGraph(const void* graph) {
  std::lock_guard<std::mutex> lock(RegMu());
  auto* g = static_cast<Graph*>(const_cast<void*>(graph));
  if (!Graphs().erase(g)) return cudaErrorInvalidResourceHandle;
  delete g;
  return cudaSuccess;
}

cudaError_t DestroyGraphExec(const void* exec) {
  std::lock_guard<std::mutex> lock(RegMu());
  auto* e = static_cast<GraphExec*>(const_cast<void*>(exec));
  if (!Execs().erase(e)) return cudaErrorInvalidResourceHandle;
  delete e;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------
// Events.

namespace {
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

// ---------------------------------------------------------------------------
// Functions.

namespace {
struct Function {
  const void* host_fn;
  std::string name;
};
std::mutex& FnMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<const void*, Function*>& FnsByHost() {
  static auto* m = new std::unordered_map<const void*, Function*>;
  return *m;
}
std::unordered_set<const void*>& FnSet() {
  static auto* s = new std::unordered_set<const void*>;
  return *s;
}
}  // namespace

void* FunctionForHostFn(const void* host_fn) {
  std::lock_guard<std::mutex> lock(FnMu());
  auto it = FnsByHost().find(host_fn);
  if (it != FnsByHost().end()) return it->second;
  auto* f = new Function{host_fn, "xpu_fake_unknown_kernel"};
  Dl_info info;
  if (host_fn != nullptr && dladdr(host_fn, &info) != 0 && info.dli_sname != nullptr &&
      info.dli_saddr == host_fn) {
    f->name = info.dli_sname;
  }
  FnsByHost()[host_fn] = f;
  FnSet().insert(f);
  return f;
}

bool IsFunction(const void* fn) {
  std::lock_guard<std::mutex> lock(FnMu());
  return FnSet().count(fn) != 0;
}

const void* FunctionHostFn(const void* fn) { return static_cast<const Function*>(fn)->host_fn; }
const char* FunctionName(const void* fn) { return static_cast<const Function*>(fn)->name.c_str(); }

uint64_t KernelDurationNs(const void* host_fn, void** args) {
  if (host_fn == reinterpret_cast<const void*>(&xpu_fake_kernel) && args != nullptr &&
      args[0] != nullptr) {
    uint64_t ns;
    memcpy(&ns, args[0], sizeof(ns));
    return ns;
  }
  return GetConfig().kernel_ns;
}

// ---------------------------------------------------------------------------
// Call counting.

namespace {
std::mutex& CountMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<std::string, unsigned long long>& Counts() {  // guarded by CountMu
  static auto* m = new std::map<std::string, unsigned long long>;
  return *m;
}

void DumpCounts() {
  const char* prefix = getenv("XPU_FAKE_CALL_COUNTS");
  if (prefix == nullptr || *prefix == '\0') return;
  const char* rank = getenv("RANK");
  std::string path = std::string(prefix) +
                     (rank ? std::string(".rank") + rank : ".pid" + std::to_string(getpid()));
  std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(CountMu());
    for (const auto& [api, n] : Counts()) fprintf(f, "%s %llu\n", api.c_str(), n);
  }
  if (fclose(f) == 0) rename(tmp.c_str(), path.c_str());  // readers see whole files only
}
}  // namespace

void CountCall(const char* api) {
  static std::once_flag once;
  std::call_once(once, [] { atexit(DumpCounts); });
  std::lock_guard<std::mutex> lock(CountMu());
  ++Counts()[api];
}

// ---------------------------------------------------------------------------
// Memory.

namespace {
std::mutex& MemMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<void*, size_t>& Allocs() {
  static auto* m = new std::unordered_map<void*, size_t>;
  return *m;
}
}  // namespace

cudaError_t Malloc(void** p, size_t bytes) {
  if (p == nullptr) return cudaErrorInvalidValue;
  // 256-byte alignment, like cudaMalloc; at least one byte so that every
  // allocation has a distinct address.
  size_t rounded = ((bytes ? bytes : 1) + 255) / 256 * 256;
  void* mem = aligned_alloc(256, rounded);
  if (mem == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(MemMu());
  Allocs()[mem] = bytes;
  *p = mem;
  return cudaSuccess;
}

cudaError_t Free(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(MemMu());
    if (!Allocs().erase(p)) return cudaErrorInvalidValue;
  }
  free(p);
  return cudaSuccess;
}

bool IsDevicePointer(const void* p) {
  std::lock_guard<std::mutex> lock(MemMu());
  return Allocs().count(const_cast<void*>(p)) != 0;
}

}  // namespace xpu::fake

extern "C" __attribute__((visibility("default"))) unsigned long long xpu_fake_call_count(
    const char* api) {
  if (api == nullptr) return 0;
  std::lock_guard<std::mutex> lock(xpu::fake::CountMu());
  auto it = xpu::fake::Counts().find(api);
  return it == xpu::fake::Counts().end() ? 0 : it->second;
}
