// tests/fake_runtime/fake_stream.cc — streams as CPU worker threads running
// a FIFO of ops, stream capture into op lists, graphs replayed by enqueueing
// copies of those ops. See fake_core.h for the model.
//
// Thread-safety: the stream/graph registry is guarded by one mutex; a
// stream's queue, counters and capture state by the stream's own mutex. A
// worker runs ops without holding any lock.
#include <sys/prctl.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "fake_core.h"

namespace xpu::fake {

struct Graph {
  std::vector<Op> ops;
};

struct Stream {
  uint32_t id = 0;  // creation order, 1-based
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  bool legacy = false;
  std::mutex mu;
  std::condition_variable work_cv;  // worker waits for ops
  std::condition_variable done_cv;  // host waits for completion
  std::deque<Op> queue;
  uint64_t submitted = 0;             // guarded by mu
  uint64_t completed = 0;             // guarded by mu
  bool closing = false;               // guarded by mu: worker exits once drained
  Graph* capture = nullptr;           // guarded by mu
  unsigned long long capture_id = 0;  // guarded by mu
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
std::atomic<uint32_t> g_stream_ids{0};
std::atomic<uint32_t> g_correlation_ids{0};

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
  s->id = ++g_stream_ids;
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

cudaError_t EnqueueKernel(Stream* s, uint64_t duration_ns, const char* name) {
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  const Config& c = GetConfig();
  if (name != nullptr && !c.slow_kernel.empty() && c.slow_kernel == name) {
    duration_ns = static_cast<uint64_t>(static_cast<double>(duration_ns) * SlowKernelFactor(c));
  }
  // By value: a captured op may replay (graph launch) after its stream is gone.
  const uint32_t correlation = ++g_correlation_ids;
  const uint32_t stream_id = s->id;
  const int device = s->device;
  return Enqueue(s, [duration_ns, name, stream_id, device, correlation] {
    KernelActivity a;
    a.start_ns = NowNs();
    SleepUntilNs(a.start_ns + duration_ns);
    a.end_ns = NowNs();
    a.name = name;
    a.stream_id = stream_id;
    a.device = device;
    a.correlation_id = correlation;
    ReportKernel(a);
  });
}

uint32_t StreamId(const Stream* s) { return s->id; }

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

}  // namespace xpu::fake
