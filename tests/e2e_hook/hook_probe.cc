// tests/e2e_hook/hook_probe.cc — xpu-hook-probe, a program for the GPU-less
// test runtime that calls every API libxpu_hook.so intercepts at least once,
// in known numbers and shapes, and writes a report of what it did. The
// end-to-end tests run it under the hook and compare the ring with the report.
//
//   xpu-hook-probe --report PREFIX [--kernel-block N] [--no-fork]
//
// The report (PREFIX.rank<RANK>) has one line per fact, words key=value:
//   pid=P rank=R world=W
//   op phase=PH kind=K api=A ... calls=N    one line per distinct op shape
//   coll comm=C api=A count=N               collectives in issue order
//   p2p comm=C dir=send|recv peer=P count=N point-to-point in issue order
//   mark phase=PH begin=NS end=NS           CLOCK_REALTIME around a phase;
//                                           every op of it completed before end
//   value key=V                             other facts (busy sync, launches)
// Phases: warmup, kernels, graph, sync, memcpy, blas, fork, nccl, end.
//
// Kernel launches come in blocks of --kernel-block launches (default 4) per
// API and kernel, so that with XPU_KERNEL_SAMPLE_EVERY dividing the block
// every API gets the same number of traced launches.
//
// Warm-up: the hook creates its CUDA event pool on the background thread at
// the first traced op and skips ops until then (counted as
// XPU_CNT_EVENT_POOL_EMPTY). The probe issues a warm-up GEMM until its own
// ring (found under $XPU_RING_DIR) counts a timed op, so that every later op
// is tracked; without a readable ring (no hook, XPU_TIMING=off) it skips this.
//
// Environment: RANK, WORLD_SIZE (defaults 0, 1), XPU_FAKE_NCCL_ID_FILE
// (needed when WORLD_SIZE > 1). Thread-safety: single-threaded, but forks.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/cli/flags.h"
#include "xpu/ring.h"
#include "xpu_fake.h"

// Not in the public headers: what nvcc (CUDA 13) host stubs call.
extern "C" {
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shmem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t shmem, cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                  size_t shmem, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                     void** args);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                             size_t shmem, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                             void** params, void** extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra);
}

// One exported host symbol per launch path, so that every path has its own
// kernel name (the runtime names kernels through dladdr). Distinct bodies keep
// identical-code folding from merging them.
volatile int g_sink = 0;
#define PROBE_KERNEL(name, v) \
  extern "C" __attribute__((noinline, used, visibility("default"))) void name() { g_sink = v; }
PROBE_KERNEL(probe_k_launch, 1)
PROBE_KERNEL(probe_k_launch_ptsz, 2)
PROBE_KERNEL(probe_k_exc, 3)
PROBE_KERNEL(probe_k_exc_ptsz, 4)
PROBE_KERNEL(probe_k_coop, 5)
PROBE_KERNEL(probe_k_coop_ptsz, 6)
PROBE_KERNEL(probe_k_stub, 7)
PROBE_KERNEL(probe_k_stub_ptsz, 8)
PROBE_KERNEL(probe_k_cu, 9)
PROBE_KERNEL(probe_k_cu_ptsz, 10)
PROBE_KERNEL(probe_k_cuex, 11)
PROBE_KERNEL(probe_k_cuex_ptsz, 12)
PROBE_KERNEL(probe_k_gpa, 13)
PROBE_KERNEL(probe_k_entry, 14)
PROBE_KERNEL(probe_k_graph, 15)

namespace {

int g_rank = 0, g_world = 1;
FILE* g_report = nullptr;

#define DIE(...)                                     \
  do {                                               \
    fprintf(stderr, "xpu-hook-probe: " __VA_ARGS__); \
    fputc('\n', stderr);                             \
    exit(2);                                         \
  } while (0)
#define CUDA_OK(x)                                                         \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) DIE("%s failed: %d", #x, static_cast<int>(e_)); \
  } while (0)
#define CU_OK(x)                                                            \
  do {                                                                      \
    CUresult e_ = (x);                                                      \
    if (e_ != CUDA_SUCCESS) DIE("%s failed: %d", #x, static_cast<int>(e_)); \
  } while (0)
#define BLAS_OK(x)                                                                   \
  do {                                                                               \
    cublasStatus_t e_ = (x);                                                         \
    if (e_ != CUBLAS_STATUS_SUCCESS) DIE("%s failed: %d", #x, static_cast<int>(e_)); \
  } while (0)
#define NCCL_OK(x)                                                         \
  do {                                                                     \
    ncclResult_t e_ = (x);                                                 \
    if (e_ != ncclSuccess) DIE("%s failed: %d", #x, static_cast<int>(e_)); \
  } while (0)

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Distinct op shapes and how often each was issued, printed at exit.
std::map<std::string, int> g_ops;
void Op(const std::string& key, int n = 1) { g_ops[key] += n; }
std::string Str(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Str(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

struct Phase {
  explicit Phase(const char* n) : name(n), begin(NowNs()) {}
  ~Phase() {
    fprintf(g_report, "mark phase=%s begin=%llu end=%llu\n", name, (unsigned long long)begin,
            (unsigned long long)NowNs());
  }
  const char* name;
  uint64_t begin;
};

// ---- warm-up: wait until the hook tracks ops (see the file comment) --------

const xpu_ring_header_v1* MapOwnRing() {
  const char* dir = getenv("XPU_RING_DIR");
  if (dir == nullptr || getenv("LD_PRELOAD") == nullptr) return nullptr;
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string p = std::string(dir) + "/xpu-ring-" + std::to_string(getpid()) +
                    (attempt == 0 ? "" : "." + std::to_string(attempt)) + ".bin";
    int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    void* m = mmap(nullptr, XPU_RING_HEADER_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) continue;
    auto* h = static_cast<const xpu_ring_header_v1*>(m);
    if (h->magic == XPU_RING_MAGIC && h->pid == getpid()) return h;
    munmap(m, XPU_RING_HEADER_SIZE);
  }
  return nullptr;
}

void WarmUp(cublasHandle_t blas, cudaStream_t stream) {
  Phase ph("warmup");
  const xpu_ring_header_v1* h = MapOwnRing();
  int calls = 0;
  float alpha = 1, beta = 0;
  static float buf[64];
  const bool wait = h != nullptr && h->timing_policy != 2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    BLAS_OK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &alpha, buf, 4, buf, 4, &beta, buf,
                        4));
    ++calls;
    if (!wait) break;
    if (__atomic_load_n(&h->counters[XPU_CNT_SAMPLED], __ATOMIC_ACQUIRE) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  } while (std::chrono::steady_clock::now() < deadline);
  // Every op of a phase completes before its end mark.
  CUDA_OK(cudaStreamSynchronize(stream));
  Op("phase=warmup kind=sync api=cudaStreamSynchronize");
  Op(Str("phase=warmup kind=gemm api=cublasSgemm_v2 m=4 n=4 k=4 batch=1 ta=0 tb=0 atype=%d "
         "ctype=%d compute=%d",
         CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F),
     calls);
  fprintf(g_report, "value ring_mapped=%d\n", h != nullptr);
  fprintf(g_report, "value warmup_ready=%d\n",
          h != nullptr && __atomic_load_n(&h->counters[XPU_CNT_SAMPLED], __ATOMIC_ACQUIRE) > 0);
}

// ---- kernels ------------------------------------------------------------------

int g_block = 4;
uint64_t g_plain_launches = 0;

void KernelPhase(cudaStream_t s) {
  Phase ph("kernels");
  const dim3 one(1);
  auto note = [&](const char* api, const char* kernel) {
    Op(Str("phase=kernels kind=kernel api=%s name=%s", api, kernel), g_block);
    g_plain_launches += g_block;
  };
  auto fn_of = [](void (*host)()) {
    cudaFunction_t f = nullptr;
    CUDA_OK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(host)));
    return reinterpret_cast<CUfunction>(f);
  };
  auto kernel_of = [](void (*host)()) {
    cudaKernel_t k = nullptr;
    CUDA_OK(cudaGetKernel(&k, reinterpret_cast<const void*>(host)));
    return k;
  };
  cudaLaunchConfig_t rc{};
  rc.gridDim = one;
  rc.blockDim = one;
  rc.stream = s;
  CUlaunchConfig dc{};
  dc.gridDimX = dc.gridDimY = dc.gridDimZ = 1;
  dc.blockDimX = dc.blockDimY = dc.blockDimZ = 1;
  dc.hStream = reinterpret_cast<CUstream>(s);
  const CUfunction f_cu = fn_of(probe_k_cu), f_cu_ptsz = fn_of(probe_k_cu_ptsz),
                   f_cuex = fn_of(probe_k_cuex), f_cuex_ptsz = fn_of(probe_k_cuex_ptsz),
                   f_gpa = fn_of(probe_k_gpa), f_entry = fn_of(probe_k_entry);
  const cudaKernel_t k_stub = kernel_of(probe_k_stub), k_stub_ptsz = kernel_of(probe_k_stub_ptsz);
  // Launch entry points handed out by the driver and the runtime.
  void* gpa = nullptr;
  CUdriverProcAddressQueryResult q{};
  CU_OK(cuGetProcAddress("cuLaunchKernel", &gpa, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult eq{};
  CUDA_OK(
      cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 13000, cudaEnableDefault, &eq));
  auto gpa_launch = reinterpret_cast<decltype(&cuLaunchKernel)>(gpa);
  auto entry_launch = reinterpret_cast<decltype(&cuLaunchKernelEx)>(entry);
  auto hp = [](void (*f)()) { return reinterpret_cast<const void*>(f); };
  CUstream cs = reinterpret_cast<CUstream>(s);
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(cudaLaunchKernel(hp(probe_k_launch), one, one, nullptr, 0, s));
  note("cudaLaunchKernel", "probe_k_launch");
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(cudaLaunchKernel_ptsz(hp(probe_k_launch_ptsz), one, one, nullptr, 0, s));
  note("cudaLaunchKernel_ptsz", "probe_k_launch_ptsz");
  for (int i = 0; i < g_block; ++i) CUDA_OK(cudaLaunchKernelExC(&rc, hp(probe_k_exc), nullptr));
  note("cudaLaunchKernelExC", "probe_k_exc");
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(cudaLaunchKernelExC_ptsz(&rc, hp(probe_k_exc_ptsz), nullptr));
  note("cudaLaunchKernelExC_ptsz", "probe_k_exc_ptsz");
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(cudaLaunchCooperativeKernel(hp(probe_k_coop), one, one, nullptr, 0, s));
  note("cudaLaunchCooperativeKernel", "probe_k_coop");
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(cudaLaunchCooperativeKernel_ptsz(hp(probe_k_coop_ptsz), one, one, nullptr, 0, s));
  note("cudaLaunchCooperativeKernel_ptsz", "probe_k_coop_ptsz");
  for (int i = 0; i < g_block; ++i) CUDA_OK(__cudaLaunchKernel(k_stub, one, one, nullptr, 0, s));
  note("__cudaLaunchKernel", "probe_k_stub");
  for (int i = 0; i < g_block; ++i)
    CUDA_OK(__cudaLaunchKernel_ptsz(k_stub_ptsz, one, one, nullptr, 0, s));
  note("__cudaLaunchKernel_ptsz", "probe_k_stub_ptsz");
  for (int i = 0; i < g_block; ++i)
    CU_OK(cuLaunchKernel(f_cu, 1, 1, 1, 1, 1, 1, 0, cs, nullptr, nullptr));
  note("cuLaunchKernel", "probe_k_cu");
  for (int i = 0; i < g_block; ++i)
    CU_OK(cuLaunchKernel_ptsz(f_cu_ptsz, 1, 1, 1, 1, 1, 1, 0, cs, nullptr, nullptr));
  note("cuLaunchKernel_ptsz", "probe_k_cu_ptsz");
  for (int i = 0; i < g_block; ++i) CU_OK(cuLaunchKernelEx(&dc, f_cuex, nullptr, nullptr));
  note("cuLaunchKernelEx", "probe_k_cuex");
  for (int i = 0; i < g_block; ++i)
    CU_OK(cuLaunchKernelEx_ptsz(&dc, f_cuex_ptsz, nullptr, nullptr));
  note("cuLaunchKernelEx_ptsz", "probe_k_cuex_ptsz");
  for (int i = 0; i < g_block; ++i)
    CU_OK(gpa_launch(f_gpa, 1, 1, 1, 1, 1, 1, 0, cs, nullptr, nullptr));
  note("cuGetProcAddress:cuLaunchKernel", "probe_k_gpa");
  for (int i = 0; i < g_block; ++i) CU_OK(entry_launch(&dc, f_entry, nullptr, nullptr));
  note("cudaGetDriverEntryPointByVersion:cuLaunchKernelEx", "probe_k_entry");
  CUDA_OK(cudaStreamSynchronize(s));
  Op("phase=kernels kind=sync api=cudaStreamSynchronize");
}

// ---- graph capture and launch -------------------------------------------------

void GraphPhase(cudaStream_t s, cublasHandle_t blas) {
  Phase ph("graph");
  cudaStream_t cap = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
  BLAS_OK(cublasSetStream(blas, cap));
  float alpha = 1, beta = 0;
  static float buf[4096];
  CUDA_OK(cudaStreamBeginCapture(cap, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < g_block; ++i) {
    CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(probe_k_graph), dim3(1), dim3(1),
                             nullptr, 0, cap));
  }
  BLAS_OK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, 40, 24, 8, &alpha, buf, 40, buf, 8, &beta,
                      buf, 40));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(cap, &graph));
  g_plain_launches += g_block;
  Op(Str("phase=graph kind=kernel api=cudaLaunchKernel name=probe_k_graph capture=1"), g_block);
  Op(
      Str("phase=graph kind=gemm api=cublasSgemm_v2 m=40 n=24 k=8 batch=1 ta=0 tb=0 atype=%d "
          "ctype=%d compute=%d capture=1",
          CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F));
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  const int launches = 3;
  for (int i = 0; i < launches; ++i) CUDA_OK(cudaGraphLaunch(exec, s));
  Op(Str("phase=graph kind=graph api=cudaGraphLaunch kernels=%d gemm_flops=%d", g_block,
         2 * 40 * 24 * 8),
     launches);
  CUDA_OK(cudaStreamSynchronize(s));
  Op("phase=graph kind=sync api=cudaStreamSynchronize");
  BLAS_OK(cublasSetStream(blas, s));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(cap));
}

// ---- host-blocking synchronization ---------------------------------------------

void SyncPhase(cudaStream_t s) {
  Phase ph("sync");
  // Keep the stream busy for g_block ms, so that the first synchronize blocks.
  uint64_t ns = 1000 * 1000;
  void* args[] = {&ns};
  const uint64_t t0 = NowNs();
  for (int i = 0; i < g_block; ++i) {
    CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                             args, 0, s));
  }
  g_plain_launches += g_block;
  Op("phase=sync kind=kernel api=cudaLaunchKernel name=xpu_fake_kernel", g_block);
  CUDA_OK(cudaStreamSynchronize(s));
  fprintf(g_report, "value busy_sync_min_end=%llu\n",
          (unsigned long long)(t0 + uint64_t(g_block) * ns));
  CUDA_OK(cudaStreamSynchronize_ptsz(s));
  Op("phase=sync kind=sync api=cudaStreamSynchronize", 2);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaDeviceSynchronize());
  Op("phase=sync kind=sync api=cudaDeviceSynchronize", 2);
  cudaEvent_t ev = nullptr;
  CUDA_OK(cudaEventCreate(&ev));
  for (int i = 0; i < 2; ++i) {
    CUDA_OK(cudaEventRecord(ev, s));
    CUDA_OK(cudaEventSynchronize(ev));
  }
  Op("phase=sync kind=sync api=cudaEventSynchronize", 2);
  CUDA_OK(cudaEventDestroy(ev));
}

// ---- synchronous copies ------------------------------------------------------

char g_symbol[256];

void MemcpyPhase() {
  Phase ph("memcpy");
  void* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 1 << 16));
  static char host[1 << 16];
  CUDA_OK(cudaMemcpy(dev, host, 4096, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev, host, 4096, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy_ptds(dev, host, 4096, cudaMemcpyHostToDevice));
  Op("phase=memcpy kind=memcpy name=cudaMemcpy_HtoD bytes=4096", 3);
  CUDA_OK(cudaMemcpy(host, dev, 1000, cudaMemcpyDeviceToHost));
  Op("phase=memcpy kind=memcpy name=cudaMemcpy_DtoH bytes=1000");
  CUDA_OK(cudaMemcpy(static_cast<char*>(dev) + 8192, dev, 512, cudaMemcpyDeviceToDevice));
  Op("phase=memcpy kind=memcpy name=cudaMemcpy_DtoD bytes=512");
  CUDA_OK(cudaMemcpy2D(dev, 128, host, 64, 64, 8, cudaMemcpyHostToDevice));
  Op("phase=memcpy kind=memcpy name=cudaMemcpy2D_HtoD bytes=512");
  CUDA_OK(cudaMemcpyToSymbol(g_symbol, host, 100, 16, cudaMemcpyHostToDevice));
  Op("phase=memcpy kind=memcpy name=cudaMemcpyToSymbol_HtoD bytes=100");
  CUDA_OK(cudaMemcpyFromSymbol(host, g_symbol, 200, 0, cudaMemcpyDeviceToHost));
  Op("phase=memcpy kind=memcpy name=cudaMemcpyFromSymbol_DtoH bytes=200");
  CUDA_OK(cudaFree(dev));
}

// ---- cuBLAS and cuBLASLt -------------------------------------------------------

std::string GemmKey(const char* phase, const char* api, int m, int n, int k, int batch,
                    cublasOperation_t ta, cublasOperation_t tb, int atype, int ctype, int compute) {
  return Str(
      "phase=%s kind=gemm api=%s m=%d n=%d k=%d batch=%d ta=%d tb=%d atype=%d ctype=%d "
      "compute=%d",
      phase, api, m, n, k, batch, static_cast<int>(ta), static_cast<int>(tb), atype, ctype,
      compute);
}

void BlasPhase(cudaStream_t s, cublasHandle_t blas) {
  Phase ph("blas");
  static double buf[1 << 15];  // large enough for every operand below
  void* A = buf;
  const float fa = 1, fb = 0;
  const double da = 1, db = 0;
  const __half ha = __float2half(1.f), hb = __float2half(0.f);
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  auto F = static_cast<float*>(A);
  auto D = static_cast<double*>(A);
  auto H = static_cast<__half*>(A);

  for (int i = 0; i < 2; ++i)
    BLAS_OK(cublasSgemm(blas, N, T, 64, 48, 32, &fa, F, 64, F, 48, &fb, F, 64));
  Op(GemmKey("blas", "cublasSgemm_v2", 64, 48, 32, 1, N, T, CUDA_R_32F, CUDA_R_32F,
             CUBLAS_COMPUTE_32F),
     2);
  BLAS_OK(cublasDgemm(blas, T, N, 32, 16, 8, &da, D, 8, D, 8, &db, D, 32));
  Op(GemmKey("blas", "cublasDgemm_v2", 32, 16, 8, 1, T, N, CUDA_R_64F, CUDA_R_64F,
             CUBLAS_COMPUTE_64F));
  BLAS_OK(cublasHgemm(blas, T, T, 16, 24, 40, &ha, H, 40, H, 24, &hb, H, 16));
  Op(GemmKey("blas", "cublasHgemm", 16, 24, 40, 1, T, T, CUDA_R_16F, CUDA_R_16F,
             CUBLAS_COMPUTE_16F));
  for (int i = 0; i < 2; ++i)
    BLAS_OK(cublasGemmEx(blas, N, N, 128, 64, 32, &fa, A, CUDA_R_16F, 128, A, CUDA_R_16F, 32, &fb,
                         A, CUDA_R_32F, 128, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  Op(GemmKey("blas", "cublasGemmEx", 128, 64, 32, 1, N, N, CUDA_R_16F, CUDA_R_32F,
             CUBLAS_COMPUTE_32F),
     2);
  const void* as[4] = {A, A, A, A};
  void* cs[4] = {A, A, A, A};
  BLAS_OK(cublasGemmBatchedEx(blas, N, T, 32, 32, 64, &fa, as, CUDA_R_16BF, 32, as, CUDA_R_16BF, 32,
                              &fb, cs, CUDA_R_16BF, 32, 4, CUBLAS_COMPUTE_32F_FAST_TF32,
                              CUBLAS_GEMM_DEFAULT));
  Op(GemmKey("blas", "cublasGemmBatchedEx", 32, 32, 64, 4, N, T, CUDA_R_16BF, CUDA_R_16BF,
             CUBLAS_COMPUTE_32F_FAST_TF32));
  BLAS_OK(cublasGemmStridedBatchedEx(blas, T, N, 24, 40, 56, &ha, A, CUDA_R_16F, 56, 0, A,
                                     CUDA_R_16F, 56, 0, &hb, A, CUDA_R_16F, 24, 0, 3,
                                     CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
  Op(GemmKey("blas", "cublasGemmStridedBatchedEx", 24, 40, 56, 3, T, N, CUDA_R_16F, CUDA_R_16F,
             CUBLAS_COMPUTE_16F));
  BLAS_OK(
      cublasSgemmStridedBatched(blas, N, N, 8, 8, 8, &fa, F, 8, 64, F, 8, 64, &fb, F, 8, 64, 5));
  Op(GemmKey("blas", "cublasSgemmStridedBatched", 8, 8, 8, 5, N, N, CUDA_R_32F, CUDA_R_32F,
             CUBLAS_COMPUTE_32F));
  BLAS_OK(
      cublasDgemmStridedBatched(blas, T, T, 12, 10, 6, &da, D, 6, 0, D, 10, 0, &db, D, 12, 0, 2));
  Op(GemmKey("blas", "cublasDgemmStridedBatched", 12, 10, 6, 2, T, T, CUDA_R_64F, CUDA_R_64F,
             CUBLAS_COMPUTE_64F));
  BLAS_OK(
      cublasHgemmStridedBatched(blas, N, T, 16, 8, 32, &ha, H, 16, 0, H, 8, 0, &hb, H, 16, 0, 7));
  Op(GemmKey("blas", "cublasHgemmStridedBatched", 16, 8, 32, 7, N, T, CUDA_R_16F, CUDA_R_16F,
             CUBLAS_COMPUTE_16F));
  // The sampler's block: one shape many times.
  const int reps = 10;
  for (int i = 0; i < reps; ++i)
    BLAS_OK(cublasSgemm(blas, N, N, 20, 20, 20, &fa, F, 20, F, 20, &fb, F, 20));
  Op(GemmKey("blas", "cublasSgemm_v2", 20, 20, 20, 1, N, N, CUDA_R_32F, CUDA_R_32F,
             CUBLAS_COMPUTE_32F),
     reps);

  // cuBLASLt: D[m x n] = op(A)[m x k] op(B)[k x n] with A transposed
  // (stored k x m), batch 2 on every layout.
  const int m = 96, n = 80, k = 64, batch = 2;
  cublasLtHandle_t lt = nullptr;
  BLAS_OK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc = nullptr;
  BLAS_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t opT = CUBLAS_OP_T;
  BLAS_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  BLAS_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
  BLAS_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  BLAS_OK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
  for (auto l : {la, lb, lc}) {
    BLAS_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                             sizeof(batch)));
  }
  for (int i = 0; i < 2; ++i) {
    BLAS_OK(cublasLtMatmul(lt, desc, &fa, A, la, A, lb, &fb, A, lc, A, lc, nullptr, nullptr, 0, s));
  }
  Op(GemmKey("blas", "cublasLtMatmul", m, n, k, batch, T, N, CUDA_R_16BF, CUDA_R_32F,
             CUBLAS_COMPUTE_32F),
     2);
  CUDA_OK(cudaStreamSynchronize(s));
  Op("phase=blas kind=sync api=cudaStreamSynchronize");
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
}

// ---- fork: the child's calls must not reach the parent's ring -------------------

// Calls that fail at once in the runtime (bad handles), so that a forked
// child can make them safely; the hook records failed calls too (CALL_FAILED).
void FailingCalls(int tag) {
  float a = 1, b = 0;
  cublasStatus_t st = cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, tag, 1, 1, &a, nullptr, tag,
                                  nullptr, 1, &b, nullptr, tag);
  ncclResult_t nr = ncclAllReduce(nullptr, nullptr, static_cast<size_t>(tag), ncclFloat32, ncclSum,
                                  nullptr, nullptr);
  if (st == CUBLAS_STATUS_SUCCESS || nr == ncclSuccess) DIE("bad-handle calls succeeded");
}

void ForkPhase() {
  Phase ph("fork");
  fflush(nullptr);
  pid_t child = fork();
  if (child < 0) DIE("fork failed");
  if (child == 0) {
    FailingCalls(77777);
    _exit(0);  // no atexit handlers: the runtime's threads are not in the child
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    DIE("forked child failed (status %d)", status);
  }
  FailingCalls(88888);  // the same in the parent: these are recorded
  Op(
      Str("phase=fork kind=gemm api=cublasSgemm_v2 m=88888 n=1 k=1 batch=1 ta=0 tb=0 atype=%d "
          "ctype=%d compute=%d failed=1",
          CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F));
  Op(Str("phase=fork kind=coll comm=none api=ncclAllReduce count=88888 dtype=%d root=-1 failed=1",
         ncclFloat32));
  fprintf(g_report, "value fork_child_tag=77777 fork_parent_tag=88888\n");
}

// ---- NCCL --------------------------------------------------------------------------

std::string ToHex(const ncclUniqueId& id) {
  std::string s;
  for (char c : id.internal) s += Str("%02x", static_cast<unsigned char>(c));
  return s;
}

ncclUniqueId ShareId() {
  ncclUniqueId id;
  const char* path = getenv("XPU_FAKE_NCCL_ID_FILE");
  if (g_rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    if (g_world > 1) {
      if (path == nullptr) DIE("WORLD_SIZE > 1 needs XPU_FAKE_NCCL_ID_FILE");
      std::string tmp = std::string(path) + ".tmp";
      FILE* f = fopen(tmp.c_str(), "w");
      if (f == nullptr) DIE("cannot write %s", tmp.c_str());
      fprintf(f, "%s\n", ToHex(id).c_str());
      fclose(f);
      if (rename(tmp.c_str(), path) != 0) DIE("rename failed");
    }
    return id;
  }
  if (path == nullptr) DIE("WORLD_SIZE > 1 needs XPU_FAKE_NCCL_ID_FILE");
  for (int i = 0; i < 60000; ++i) {
    if (FILE* f = fopen(path, "r")) {
      char buf[512] = {};
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      if (n >= 2 * sizeof(id.internal)) {
        for (size_t j = 0; j < sizeof(id.internal); ++j) {
          unsigned v = 0;
          sscanf(buf + 2 * j, "%2x", &v);
          id.internal[j] = static_cast<char>(v);
        }
        return id;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  DIE("no NCCL id");
}

struct Nccl {
  cudaStream_t s;
  void* buf;
  void Coll(const char* comm, const char* api, size_t count, int dtype, int root) {
    fprintf(g_report, "coll comm=%s api=%s count=%zu\n", comm, api, count);
    Op(Str("phase=nccl kind=coll comm=%s api=%s count=%zu dtype=%d root=%d", comm, api, count,
           dtype, root));
  }
  void P2p(const char* comm, bool send, int peer, size_t count, int dtype) {
    const char* api = send ? "ncclSend" : "ncclRecv";
    fprintf(g_report, "p2p comm=%s dir=%s peer=%d count=%zu\n", comm, send ? "send" : "recv", peer,
            count);
    Op(Str("phase=nccl kind=coll comm=%s api=%s count=%zu dtype=%d root=%d", comm, api, count,
           dtype, peer));
  }
};

void NcclPhase(cudaStream_t s) {
  Phase ph("nccl");
  void* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, 1 << 20));
  Nccl n{s, buf};
  ncclUniqueId id = ShareId();
  ncclComm_t a = nullptr;
  NCCL_OK(ncclCommInitRank(&a, g_world, id, g_rank));
  Op("phase=nccl kind=comm_init api=ncclCommInitRank comm=A");
  const int r = g_rank, w = g_world;
  // Barrier: the ranks finish their warm-up at different times.
  NCCL_OK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, a, s));
  n.Coll("A", "ncclAllReduce", 1, ncclFloat32, -1);
  CUDA_OK(cudaStreamSynchronize(s));
  Op("phase=nccl kind=sync api=cudaStreamSynchronize");
  for (int i = 0; i < 3; ++i) {
    NCCL_OK(ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, a, s));
    n.Coll("A", "ncclAllReduce", 1000, ncclFloat32, -1);
  }
  for (int i = 0; i < 2; ++i) {
    NCCL_OK(ncclAllGather(buf, buf, 256, ncclBfloat16, a, s));
    n.Coll("A", "ncclAllGather", 256, ncclBfloat16, -1);
  }
  NCCL_OK(ncclReduceScatter(buf, buf, 128, ncclFloat16, ncclSum, a, s));
  n.Coll("A", "ncclReduceScatter", 128, ncclFloat16, -1);
  NCCL_OK(ncclBroadcast(buf, buf, 64, ncclInt32, w - 1, a, s));
  n.Coll("A", "ncclBroadcast", 64, ncclInt32, w - 1);
  NCCL_OK(ncclBcast(buf, 100, ncclUint8, 0, a, s));
  n.Coll("A", "ncclBcast", 100, ncclUint8, 0);
  NCCL_OK(ncclReduce(buf, buf, 10, ncclFloat64, ncclMax, 0, a, s));
  n.Coll("A", "ncclReduce", 10, ncclFloat64, 0);
  NCCL_OK(ncclAlltoAll(buf, buf, 16, ncclInt64, a, s));
  n.Coll("A", "ncclAlltoAll", 16, ncclInt64, -1);
  NCCL_OK(ncclGather(buf, buf, 32, ncclFloat32, 0, a, s));
  n.Coll("A", "ncclGather", 32, ncclFloat32, 0);
  NCCL_OK(ncclScatter(buf, buf, 32, ncclFloat32, 0, a, s));
  n.Coll("A", "ncclScatter", 32, ncclFloat32, 0);
  for (int i = 0; i < 2; ++i) {  // ring exchange
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(buf, 2048, ncclFloat32, (r + 1) % w, a, s));
    n.P2p("A", true, (r + 1) % w, 2048, ncclFloat32);
    NCCL_OK(ncclRecv(buf, 2048, ncclFloat32, (r - 1 + w) % w, a, s));
    n.P2p("A", false, (r - 1 + w) % w, 2048, ncclFloat32);
    NCCL_OK(ncclGroupEnd());
  }
  NCCL_OK(ncclGroupStart());  // grouped collectives
  NCCL_OK(ncclAllReduce(buf, buf, 7, ncclFloat32, ncclSum, a, s));
  n.Coll("A", "ncclAllReduce", 7, ncclFloat32, -1);
  NCCL_OK(ncclAllReduce(buf, buf, 9, ncclFloat32, ncclSum, a, s));
  n.Coll("A", "ncclAllReduce", 9, ncclFloat32, -1);
  NCCL_OK(ncclGroupEnd());
  const int reps = 7;  // the sampler's block
  for (int i = 0; i < reps; ++i) {
    NCCL_OK(ncclAllReduce(buf, buf, 333, ncclFloat32, ncclSum, a, s));
    n.Coll("A", "ncclAllReduce", 333, ncclFloat32, -1);
  }
  // A second communicator: its own sequence numbers and comm_id.
  ncclComm_t c = nullptr;
  NCCL_OK(ncclCommSplit(a, 0, r, &c, nullptr));
  Op("phase=nccl kind=comm_init api=ncclCommSplit comm=C");
  for (int i = 0; i < 2; ++i) {
    NCCL_OK(ncclAllReduce(buf, buf, 500, ncclFloat32, ncclSum, c, s));
    n.Coll("C", "ncclAllReduce", 500, ncclFloat32, -1);
  }
  CUDA_OK(cudaStreamSynchronize(s));
  Op("phase=nccl kind=sync api=cudaStreamSynchronize");
  NCCL_OK(ncclCommFinalize(c));
  Op("phase=nccl kind=comm_destroy api=ncclCommFinalize comm=C");
  NCCL_OK(ncclCommDestroy(c));
  Op("phase=nccl kind=comm_destroy api=ncclCommDestroy comm=C");
  ncclComm_t d = nullptr;
  NCCL_OK(ncclCommSplit(a, 1, r, &d, nullptr));
  Op("phase=nccl kind=comm_init api=ncclCommSplit comm=D");
  NCCL_OK(ncclCommAbort(d));
  Op("phase=nccl kind=comm_destroy api=ncclCommAbort comm=D");
  NCCL_OK(ncclCommDestroy(a));
  Op("phase=nccl kind=comm_destroy api=ncclCommDestroy comm=A");
  CUDA_OK(cudaFree(buf));
}

}  // namespace

int main(int argc, char** argv) {
  std::string report;
  bool no_fork = false;
  CLI::App app(
      "xpu-hook-probe: calls every intercepted API in known numbers and shapes and reports "
      "what it did, for the hook's end-to-end tests.");
  xpu::flags::Configure(app, "xpu-hook-probe");
  app.add_option("--report", report, "write what was done to PREFIX.rank<RANK>")
      ->type_name("PREFIX")
      ->required();
  app.add_option("--kernel-block", g_block, "threads per block of the kernel launches")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_flag("--no-fork", no_fork, "skip the fork phase");
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 1); rc >= 0) return rc;
  const bool do_fork = !no_fork;
  if (report.empty() || g_block < 1) DIE("--report PREFIX is required; --kernel-block >= 1");
  if (const char* v = getenv("RANK")) g_rank = atoi(v);
  if (const char* v = getenv("WORLD_SIZE")) g_world = atoi(v);
  if (g_world < 1 || g_rank < 0 || g_rank >= g_world) DIE("bad RANK/WORLD_SIZE");
  std::string path = report + ".rank" + std::to_string(g_rank);
  g_report = fopen(path.c_str(), "w");
  if (g_report == nullptr) DIE("cannot write %s", path.c_str());
  fprintf(g_report, "pid=%d rank=%d world=%d\n", static_cast<int>(getpid()), g_rank, g_world);

  CUDA_OK(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t blas = nullptr;
  BLAS_OK(cublasCreate(&blas));
  BLAS_OK(cublasSetStream(blas, s));

  WarmUp(blas, s);
  KernelPhase(s);
  GraphPhase(s, blas);
  SyncPhase(s);
  MemcpyPhase();
  BlasPhase(s, blas);
  if (do_fork) ForkPhase();
  NcclPhase(s);
  {
    Phase ph("end");
    CUDA_OK(cudaDeviceSynchronize());
    Op("phase=end kind=sync api=cudaDeviceSynchronize");
  }
  BLAS_OK(cublasDestroy(blas));
  fprintf(g_report, "value plain_launches=%llu\n", (unsigned long long)g_plain_launches);
  for (const auto& [key, n] : g_ops) fprintf(g_report, "op %s calls=%d\n", key.c_str(), n);
  fprintf(g_report, "done\n");
  fclose(g_report);
  return 0;
}
