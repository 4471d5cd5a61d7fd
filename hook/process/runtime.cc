// hook/process/runtime.cc — the hook's process-wide state (runtime.h): runtime
// init/shutdown, fork handling, the activity flags, and the small always-on
// pieces of core_api.h: Active, Count, ReentrancyGuard, StreamIndex,
// InternSignature, EnsureStarted, EmitHostInterval, KernelSampleEvery.
//
// Everything here is reachable from application threads at any time,
// including before the constructor ran (another library's constructor may
// call CUDA first) and after exit started: every entry point checks the
// runtime pointer and the activity flags, which are constant-initialized.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "hook/core_api.h"
#include "hook/process/py_callsite.h"
#include "hook/process/runtime.h"
#include "hook/tracing/record_fields.h"

namespace xpu::hook {
namespace {

std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<bool> g_gpu_active{false};
std::atomic<bool> g_host_active{false};
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_forked{false};
std::atomic<int> g_started{0};  // 0 = not yet, 1 = started (or starting)
std::atomic<bool> g_shutdown{false};
std::atomic<uint32_t> g_kernel_sample_every{0};

// initial-exec: no __tls_get_addr call (which may allocate) on the launch
// path. Fine for a library that is LD_PRELOADed or linked at start-up.
__attribute__((tls_model("initial-exec"))) thread_local int t_guard_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local uint16_t t_thread_index = 0;
std::atomic<uint32_t> g_next_thread_index{1};

// Per-thread cache of interned signatures (InternSignature). Trivially
// constructible: no TLS init guard.
constexpr size_t kSigCacheName = 48;  // longer names bypass the cache
constexpr uint32_t kSigCacheEntries = 8;
struct SigCacheEntry {
  xpu_signature_v1 sig;
  char name[kSigCacheName];
  uint32_t name_len;
  uint32_t id;  // 0 = empty
};
__attribute__((tls_model("initial-exec"))) thread_local SigCacheEntry t_sig_cache[kSigCacheEntries];

inline uint32_t SigCacheIndex(const xpu_signature_v1& sig, size_t name_len) {
  uint64_t x = sig.kind ^ (uint64_t{sig.m} << 8) ^ (uint64_t{sig.n} << 24) ^
               (uint64_t{sig.k} << 40) ^ sig.count ^ sig.comm_id ^ name_len;
  x *= 0x9e3779b97f4a7c15ull;
  return static_cast<uint32_t>(x >> 61);
}

// Stream pointer -> index. Open addressing; a key is claimed with a CAS and
// its index published afterwards (0 in `index` = being published).
constexpr uint32_t kStreamSlots = 8192;  // power of two
struct StreamSlot {
  std::atomic<uintptr_t> key{0};
  std::atomic<uint32_t> index{0};
};
StreamSlot g_streams[kStreamSlots];
std::atomic<uint32_t> g_next_stream{1};

void RecomputeActive() {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  bool on = rt != nullptr && g_enabled.load(std::memory_order_relaxed) &&
            !g_forked.load(std::memory_order_relaxed) &&
            !g_shutdown.load(std::memory_order_relaxed);
  g_host_active.store(on, std::memory_order_release);
  g_gpu_active.store(on && rt->config.timing != TimingPolicy::kOff, std::memory_order_release);
}

void OnExit() { ShutdownRuntime(100 * 1000 * 1000); }

}  // namespace

Runtime* GetRuntime() { return g_runtime.load(std::memory_order_acquire); }

bool Active() { return g_gpu_active.load(std::memory_order_relaxed); }
bool HostActive() { return g_host_active.load(std::memory_order_relaxed); }

uint32_t KernelSampleEvery() { return g_kernel_sample_every.load(std::memory_order_relaxed); }

void Count(xpu_counter counter, uint64_t n) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt != nullptr) rt->ring.Count(counter, n);
}

ReentrancyGuard::ReentrancyGuard() : entered_(t_guard_depth++ == 0) {
  // Counted here so that every pass-through (a library calling another
  // interposed function, the hook's own calls) shows up once.
  if (!entered_) Count(XPU_CNT_REENTRANT);
}
ReentrancyGuard::~ReentrancyGuard() { --t_guard_depth; }

uint16_t StreamIndex(const void* stream) {
  uintptr_t key = reinterpret_cast<uintptr_t>(stream);
  if (key == 0 || key == 1) return 0;  // NULL and cudaStreamLegacy: legacy default stream
  uint32_t i = static_cast<uint32_t>((key >> 4) * 0x9e3779b97f4a7c15ull >> 40) & (kStreamSlots - 1);
  for (uint32_t probe = 0; probe < kStreamSlots; ++probe, i = (i + 1) & (kStreamSlots - 1)) {
    StreamSlot& s = g_streams[i];
    uintptr_t cur = s.key.load(std::memory_order_acquire);
    if (cur == 0) {
      if (s.key.compare_exchange_strong(cur, key, std::memory_order_acq_rel)) {
        uint32_t idx = g_next_stream.fetch_add(1, std::memory_order_relaxed);
        if (idx > 65535) idx = 65535;
        s.index.store(idx, std::memory_order_release);
        return static_cast<uint16_t>(idx);
      }
    }
    if (cur == key) {
      // Claimed by another thread a few instructions ago: bounded wait.
      for (int spin = 0; spin < (1 << 16); ++spin) {
        uint32_t idx = s.index.load(std::memory_order_acquire);
        if (idx != 0) return static_cast<uint16_t>(idx);
      }
      return 65535;
    }
  }
  return 65535;  // table full: saturate (records stay valid, streams merge)
}

void EnsureStarted() {
  if (g_started.load(std::memory_order_acquire) != 0) return;
  Runtime* rt = GetRuntime();
  if (rt == nullptr || !HostActive()) return;
  int expected = 0;
  if (!g_started.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return;
  // A child forked before the first traced call has no atfork handler run
  // if it was registered late; the pid is the second line of defence.
  if (getpid() != rt->pid) {
    DisableInForkedChild();
    return;
  }
  // Registered now, after the CUDA runtime registered its own handlers at its
  // initialisation: atexit runs in reverse order, so ours flushes while CUDA
  // still works.
  atexit(&OnExit);
  if (!rt->worker.Start()) Count(XPU_CNT_INTERNAL);
}

void MarkStartedForTest() { g_started.store(1, std::memory_order_release); }

bool EmitHostRecord(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                    uint16_t flags) {
  if (!HostActive()) return false;
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  // Host activity alone hands the ring to the daemon only in a process that
  // its launcher made a rank. A process that neither has a rank nor ever
  // launches GPU work (torchrun's agent, a data-prep helper) writes into its
  // ring but never registers, so it is no job and no rank of one; its first
  // GPU op starts the hand-over, and the daemon then reads the ring from its
  // start, host records included.
  if (rt->config.rank >= 0) EnsureStarted();
  if (t_thread_index == 0) {
    uint32_t idx = g_next_thread_index.fetch_add(1, std::memory_order_relaxed);
    t_thread_index = static_cast<uint16_t>(idx > 65535 ? 65535 : idx);
  }
  xpu_record_v1 r{};
  r.sig_id = sig_id;
  r.start_ns = start_ns;
  uint16_t f = static_cast<uint16_t>(flags | XPU_REC_HOST);
  r.duration = EncodeDuration(end_ns > start_ns ? end_ns - start_ns : 0, &f);
  r.seq = value;
  r.stream = t_thread_index;
  r.flags = f;
  return rt->ring.Write(r);
}

void EmitHostInterval(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                      uint16_t flags) {
  EmitHostRecord(sig_id, start_ns, end_ns, value, flags);
}

uint32_t InternSignature(const xpu_signature_v1& sig, const char* name, size_t name_len) {
  // Interning works while tracing is switched off at run time, so that ids
  // cached by the layers stay valid when it is switched back on; a forked
  // child must not write into its parent's table.
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (rt == nullptr || g_forked.load(std::memory_order_relaxed)) return 0;
  if (name == nullptr) name_len = 0;
  // A thread launches the same few shapes over and over: a small per-thread
  // cache of exact (signature, name) matches skips the table's full hash.
  // Ids never change once given, so an entry stays right forever.
  if (name_len > kSigCacheName) return rt->sigs.Intern(sig, name, name_len);
  SigCacheEntry& e = t_sig_cache[SigCacheIndex(sig, name_len)];
  if (e.id != 0 && e.name_len == name_len && std::memcmp(e.name, name, name_len) == 0 &&
      std::memcmp(&e.sig, &sig, sizeof(sig)) == 0) {
    return e.id;
  }
  const uint32_t id = rt->sigs.Intern(sig, name, name_len);
  if (id != 0) {
    std::memcpy(&e.sig, &sig, sizeof(sig));
    std::memcpy(e.name, name, name_len);
    e.name_len = static_cast<uint32_t>(name_len);
    e.id = id;
  }
  return id;
}

bool WriteRecord(const xpu_record_v1& rec) {
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  return rt != nullptr && !g_forked.load(std::memory_order_relaxed) && rt->ring.Write(rec);
}

bool InitRuntime(const Config& config, pid_t pid, std::string* error) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) {
    *error = "runtime already initialised";
    return false;
  }
  auto* rt = new Runtime();  // never freed: see runtime.h
  rt->config = config;
  rt->pid = pid;
  RingIdentity id;
  id.pid = pid;
  id.rank = config.rank;
  id.local_rank = config.local_rank;
  id.world_size = config.world_size;
  id.local_world_size = config.local_world_size;
  id.created_ns = NowNs();
  id.timing_policy = static_cast<uint32_t>(config.timing);
  id.job = config.job;
  id.host = config.host;
  id.job_name = config.job_name;
  // /proc/self/stat field 22 (starttime) tells a reused pid apart.
  if (FILE* f = fopen("/proc/self/stat", "re")) {
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (char* p = strrchr(buf, ')')) {
      int field = 2;
      for (char* tok = strtok(p + 1, " "); tok != nullptr; tok = strtok(nullptr, " ")) {
        if (++field == 22) {
          id.start_time_ticks = strtoull(tok, nullptr, 10);
          break;
        }
      }
    }
  }
  RingLayout layout = ComputeLayout(config.ring_capacity, config.sig_capacity, config.str_capacity);
  if (!rt->ring.Create(layout, id, config.ring_dir, error)) return false;
  rt->sigs.Init(&rt->ring);
  rt->sampler.Init(config.sig_capacity);
  rt->lanes.Init();  // failure: every traced op gets a host-side record
  rt->marker_ns = uint64_t{config.marker_us} * 1000;
  rt->stream_seq.reset(new std::atomic<uint32_t>[kMaxStreams]);
  for (uint32_t i = 0; i < kMaxStreams; ++i) rt->stream_seq[i].store(0, std::memory_order_relaxed);
  rt->clock.Init(&rt->cuda, uint64_t{config.clock_recal_s} * 1000000000ull);
  rt->pool.Init(&rt->cuda, config.event_pool);
  rt->holds.Init(&rt->cuda, config.timing_hold, uint64_t{config.hold_timeout_us} * 1000);
  rt->overhead.Init(&rt->cuda);
  rt->worker.Init(rt);
  rt->daemon.Init(&rt->ring, config);
  if (!config.enable) rt->ring.SetProducerState(XPU_PRODUCER_DISABLED);
  g_enabled.store(config.enable, std::memory_order_relaxed);
  g_kernel_sample_every.store(config.kernel_sample_every, std::memory_order_relaxed);
  g_runtime.store(rt, std::memory_order_release);
  RecomputeActive();
  // A python binary has its C API loaded by now (linked in, or DT_NEEDED).
  ConfigurePyCallsites(config.py_stack_depth);
  MaybeResolvePyApi(NowNs());
  return true;
}

void ShutdownRuntime(uint64_t flush_timeout_ns) {
  Runtime* rt = GetRuntime();
  if (rt == nullptr || g_forked.load(std::memory_order_relaxed) || getpid() != rt->pid) return;
  if (g_shutdown.exchange(true)) return;
  RecomputeActive();  // no new ops from here on
  if (rt->worker.running()) {
    rt->worker.RequestFlush(NowNs() + flush_timeout_ns);
    // The worker may be stuck inside a CUDA call that is being torn down:
    // wait a bounded time, never join.
    uint64_t give_up = NowNs() + flush_timeout_ns + 200 * 1000 * 1000;
    while (!rt->worker.flushed() && NowNs() < give_up) {
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
  }
  uint32_t state = __atomic_load_n(&rt->ring.header()->producer_state, __ATOMIC_RELAXED);
  if (state == XPU_PRODUCER_ACTIVE) rt->ring.SetProducerState(XPU_PRODUCER_EXITED);
  rt->ring.RemoveFileIfUnused();
}

void DisableInForkedChild() {
  g_forked.store(true, std::memory_order_relaxed);
  RecomputeActive();
  // The child has no background thread; its copy of the daemon socket would
  // keep the connection open (hiding the parent's exit from the daemon).
  if (Runtime* rt = GetRuntime()) rt->daemon.CloseInForkedChild();
}

bool SetEnabled(bool enabled) {
  bool prev = g_enabled.exchange(enabled, std::memory_order_relaxed);
  RecomputeActive();
  Runtime* rt = GetRuntime();
  if (rt != nullptr && !g_forked.load(std::memory_order_relaxed) &&
      !g_shutdown.load(std::memory_order_relaxed)) {
    rt->ring.SetProducerState(enabled ? XPU_PRODUCER_ACTIVE : XPU_PRODUCER_DISABLED);
  }
  return prev;
}

}  // namespace xpu::hook
