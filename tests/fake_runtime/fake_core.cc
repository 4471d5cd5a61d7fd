// tests/fake_runtime/fake_core.cc — configuration, the clock and timed
// sleeps, kernel functions, device memory and call counting of the fake
// runtime. Streams and graphs live in fake_stream.cc, events in
// fake_event.cc. See fake_core.h for the model.
//
// Thread-safety: the configuration is built once (std::call_once); the
// function, memory and counter registries are guarded by one mutex each.
#include "fake_core.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
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
  c.misaligned_factor = EnvDouble("XPU_FAKE_MISALIGNED_FACTOR", 1.0);
  if (!(c.misaligned_factor > 0)) c.misaligned_factor = 1.0;
  c.net_gbps = EnvDouble("XPU_FAKE_NET_GBPS", 100.0);
  const char* r = getenv("RANK");
  c.rank = r ? atoi(r) : -1;
  const char* lr = getenv("LOCAL_RANK");
  c.local_rank = lr ? atoi(lr) : -1;
  for (int s : EnvIntList("XPU_FAKE_SLOW_RANKS")) {
    if (s == c.rank) c.slow_gemm_factor = EnvDouble("XPU_FAKE_SLOW_GEMM_FACTOR", 2.0);
  }
  if (const char* k = getenv("XPU_FAKE_SLOW_KERNEL")) c.slow_kernel = k;
  for (int s : EnvIntList("XPU_FAKE_SLOW_RANKS")) {
    if (s == c.rank) c.slow_kernel_factor = EnvDouble("XPU_FAKE_SLOW_KERNEL_FACTOR", 2.0);
  }
  const double after_s = EnvDouble("XPU_FAKE_SLOW_AFTER_S", 0);
  if (after_s > 0) c.slow_from_ns = NowNs() + static_cast<uint64_t>(after_s * 1e9);
  c.slow_link_ranks = EnvIntList("XPU_FAKE_SLOW_LINK_RANKS");
  c.slow_link_factor = EnvDouble("XPU_FAKE_SLOW_LINK_FACTOR", 2.0);
  return c;
}

Config* g_config = nullptr;
std::once_flag g_config_once;

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

double SlowGemmFactor(const Config& c) {
  return c.slow_from_ns == 0 || NowNs() >= c.slow_from_ns ? c.slow_gemm_factor : 1.0;
}

double SlowKernelFactor(const Config& c) {
  return c.slow_from_ns == 0 || NowNs() >= c.slow_from_ns ? c.slow_kernel_factor : 1.0;
}

bool MisalignedGemm(uint64_t m, uint64_t n, uint64_t k) {
  return m % kGemmAlignment != 0 || n % kGemmAlignment != 0 || k % kGemmAlignment != 0;
}

uint64_t GemmDurationNs(uint64_t m, uint64_t n, uint64_t k, uint64_t batch) {
  const Config& c = GetConfig();
  double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                 static_cast<double>(batch ? batch : 1);
  double ns = flops / (c.tflops * 1e12) * 1e9 * SlowGemmFactor(c);
  if (MisalignedGemm(m, n, k)) ns *= c.misaligned_factor;
  return static_cast<uint64_t>(ns);
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
  std::call_once(once, [] {
    atexit(DumpCounts);
    // Fork safety: another thread (a stream worker, the hook's completion
    // thread polling events) may hold the mutex when the application forks;
    // the child would then block forever on its first call. Hold it across
    // fork so that both sides start with it unlocked.
    pthread_atfork([] { CountMu().lock(); }, [] { CountMu().unlock(); },
                   [] { CountMu().unlock(); });
  });
  std::lock_guard<std::mutex> lock(CountMu());
  ++Counts()[api];
}

// ---------------------------------------------------------------------------
// Profiler view.

namespace {
std::atomic<KernelObserver> g_kernel_observer{nullptr};
std::atomic<ApiExitHook> g_api_exit_hook{nullptr};
}  // namespace

void SetKernelObserver(KernelObserver observer) {
  g_kernel_observer.store(observer, std::memory_order_release);
}

void ReportKernel(const KernelActivity& activity) {
  if (KernelObserver o = g_kernel_observer.load(std::memory_order_acquire)) o(activity);
}

void SetApiExitHook(ApiExitHook hook) { g_api_exit_hook.store(hook, std::memory_order_release); }

ApiScope::~ApiScope() {
  if (ApiExitHook h = g_api_exit_hook.load(std::memory_order_acquire)) h(api_);
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
