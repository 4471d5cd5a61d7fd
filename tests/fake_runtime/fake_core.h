// tests/fake_runtime/fake_core.h — the execution model shared by the GPU-less
// test doubles of libcudart, libcuda, libcublas, libcublasLt and libnccl.
//
// Model (documented for users in docs/; this header is the reference):
// - A "device" is a bookkeeping number. XPU_FAKE_DEVICES devices exist
//   (default 1). Device memory is host memory.
// - Every stream, the per-device legacy default stream included, is one CPU
//   worker thread that executes a FIFO of ops. A "kernel" op occupies the
//   worker for a modelled duration (sleep for the bulk, spin for the last
//   50 us so that durations are accurate). Streams are independent of each
//   other; the legacy stream does NOT implicitly synchronise with other
//   streams (cudaStreamWaitEvent is the only cross-stream dependency).
//   cudaStreamPerThread is mapped to the legacy stream of the current device.
// - An event record is an op that stamps CLOCK_REALTIME when the worker
//   reaches it; elapsed time is the difference of two stamps.
// - Stream capture: ops enqueued on a capturing stream are appended to the
//   graph instead of running; cudaGraphLaunch enqueues copies of them.
//   Event records and event waits inside a capture are accepted and dropped
//   (single-stream capture only).
// - Global state is built on first use and never destroyed, so that worker
//   threads blocked in a collective at process exit never touch freed memory.
//
// Thread-safety: every function here is safe to call from any thread.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_CORE_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_CORE_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xpu_fake.h"

namespace xpu::fake {

// Environment configuration, read once (see ReloadConfigForTesting).
struct Config {
  int devices = 1;                   // XPU_FAKE_DEVICES
  uint64_t kernel_ns = 20000;        // XPU_FAKE_KERNEL_NS
  double tflops = 100.0;             // XPU_FAKE_TFLOPS
  double slow_gemm_factor = 1.0;     // XPU_FAKE_SLOW_GEMM_FACTOR if RANK is slow
  double misaligned_factor = 1.0;    // XPU_FAKE_MISALIGNED_FACTOR (MisalignedGemm)
  double net_gbps = 100.0;           // XPU_FAKE_NET_GBPS (busbw, GB/s = 1e9 B/s)
  std::vector<int> slow_link_ranks;  // XPU_FAKE_SLOW_LINK_RANKS
  double slow_link_factor = 1.0;     // XPU_FAKE_SLOW_LINK_FACTOR
  int rank = -1;                     // RANK
  int local_rank = -1;               // LOCAL_RANK
  std::string slow_kernel;           // XPU_FAKE_SLOW_KERNEL: kernel name slowed ...
  double slow_kernel_factor = 1.0;   // ... by XPU_FAKE_SLOW_KERNEL_FACTOR if RANK is slow
  uint64_t slow_from_ns = 0;         // slow factors apply from here (XPU_FAKE_SLOW_AFTER_S)
};
// The GEMM and kernel slow-down factors of this rank now (1 before
// XPU_FAKE_SLOW_AFTER_S seconds since the configuration was first read).
double SlowGemmFactor(const Config& c);
double SlowKernelFactor(const Config& c);
const Config& GetConfig();
// Re-reads the environment. Only for tests, while no op is in flight.
void ReloadConfigForTesting();

// CLOCK_REALTIME in ns (the clock the hook uses for records).
uint64_t NowNs();
// Returns at or after `deadline_ns` (CLOCK_REALTIME): sleeps, then spins
// through the last 50 us.
void SleepUntilNs(uint64_t deadline_ns);

// A GEMM shape that real cuBLAS runs on a slower kernel: m, n or k not a
// multiple of kGemmAlignment elements (the tensor-core tiles of the fast
// path; the engine's alignment rule, common/analysis/gemm.h, names 64 for
// 16-bit types).
inline constexpr uint64_t kGemmAlignment = 64;
bool MisalignedGemm(uint64_t m, uint64_t n, uint64_t k);
// Modelled duration of a GEMM of 2*m*n*k*batch FLOPs on this rank, times
// XPU_FAKE_MISALIGNED_FACTOR (default 1) for a misaligned shape.
uint64_t GemmDurationNs(uint64_t m, uint64_t n, uint64_t k, uint64_t batch);

using Op = std::function<void()>;

struct Stream;

// Current device of the calling thread (cudaSetDevice).
int CurrentDevice();
cudaError_t SetCurrentDevice(int device);

// Resolves a cudaStream_t/CUstream handle: null, cudaStreamLegacy and
// cudaStreamPerThread map to the current device's legacy stream. Returns
// nullptr for an unknown handle.
Stream* ResolveStream(const void* handle);
cudaError_t CreateStream(unsigned flags, int priority, void** out);
cudaError_t DestroyStream(const void* handle);
// Appends `op` (or records it into the active capture). Never blocks on the
// stream's work.
cudaError_t Enqueue(Stream* s, Op op);
// A kernel named `name` (a string that outlives the process: a function's
// registered name or a literal; nullptr = unnamed) running for duration_ns,
// times XPU_FAKE_SLOW_KERNEL_FACTOR when it is the slow kernel of a slow rank.
cudaError_t EnqueueKernel(Stream* s, uint64_t duration_ns, const char* name = nullptr);
// Sequential id of a stream (1, 2, ... in creation order), like CUPTI's.
uint32_t StreamId(const Stream* s);
cudaError_t SynchronizeStream(Stream* s);
cudaError_t QueryStream(Stream* s);
cudaError_t SynchronizeDevice();
int StreamDevice(const Stream* s);
void StreamFlags(const Stream* s, unsigned* flags, int* priority);

// Capture.
cudaError_t BeginCapture(Stream* s);
cudaError_t EndCapture(Stream* s, void** graph_out);
bool IsCapturing(Stream* s, unsigned long long* id);
cudaError_t InstantiateGraph(const void* graph, void** exec_out);
cudaError_t LaunchGraph(const void* exec, Stream* s);
cudaError_t DestroyGraph(const void* graph);
cudaError_t DestroyGraphExec(const void* exec);

// Events (cudaEvent_t == CUevent).
cudaError_t CreateEvent(unsigned flags, void** out);
cudaError_t DestroyEvent(const void* event);
cudaError_t RecordEvent(const void* event, Stream* s);
cudaError_t QueryEvent(const void* event);
cudaError_t SynchronizeEvent(const void* event);
cudaError_t ElapsedMs(const void* start, const void* end, float* ms);
cudaError_t StreamWaitEvent(Stream* s, const void* event);
// Host time at which the event was reached; 0 if not reached. For tests.
uint64_t EventStampNs(const void* event);

// Kernel functions (cudaFunction_t == CUfunction): a stable handle per host
// function pointer. The name comes from dladdr (the program must export its
// symbols, -rdynamic) or is "xpu_fake_unknown_kernel".
void* FunctionForHostFn(const void* host_fn);
bool IsFunction(const void* fn);
const void* FunctionHostFn(const void* fn);
const char* FunctionName(const void* fn);
// Modelled duration of launching `host_fn` with `args` (see xpu_fake.h).
uint64_t KernelDurationNs(const void* host_fn, void** args);

// Per-API call counters: the ground truth that end-to-end tests compare the
// hook's records with. Every exported API function of the doubles counts
// itself on entry. With XPU_FAKE_CALL_COUNTS=PREFIX the process writes
// PREFIX.rank<RANK> (PREFIX.pid<PID> when RANK is unset) at normal exit, one
// "<api> <count>" line per API, sorted by name.
void CountCall(const char* api);

// What a profiler sees (the fake libcupti, fake_cupti.cc): every kernel op,
// the NCCL "kernels" included, reported when it ends, on the stream's worker
// thread, while an observer is installed. Times are CLOCK_REALTIME ns.
struct KernelActivity {
  const char* name = nullptr;  // outlives the process
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream_id = 0;
  int device = 0;
  uint32_t correlation_id = 0;
};
using KernelObserver = void (*)(const KernelActivity&);
// nullptr removes it. One observer at a time; a relaxed load per kernel.
void SetKernelObserver(KernelObserver observer);
void ReportKernel(const KernelActivity& activity);
// Called when an exported API function returns (the exit site of a CUPTI
// runtime-API callback), with its name; nullptr removes it.
using ApiExitHook = void (*)(const char* api);
void SetApiExitHook(ApiExitHook hook);

// Counts the call on entry and runs the API exit hook on return.
class ApiScope {
 public:
  explicit ApiScope(const char* api) : api_(api) { CountCall(api); }
  ~ApiScope();
  ApiScope(const ApiScope&) = delete;
  ApiScope& operator=(const ApiScope&) = delete;

 private:
  const char* api_;
};
#define XPU_FAKE_COUNT_CALL() ::xpu::fake::ApiScope xpu_fake_api_scope_(__func__)

// Device memory (host memory underneath).
cudaError_t Malloc(void** p, size_t bytes);
cudaError_t Free(void* p);
bool IsDevicePointer(const void* p);

}  // namespace xpu::fake

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_CORE_H_
