// tests/fake_runtime/fake_runtime_unittest.cc — unit tests of the GPU-less
// CUDA/cuBLAS/cuBLASLt/NCCL doubles through their public C APIs.
//
// Timing assertions are one-sided where the machine can only make things
// slower: a measured duration must be >= the modelled one (the model sleeps
// at least that long) and below modelled + kSlackMs, a slack large enough for
// a loaded 2-core CI machine yet far smaller than the differences tested.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "fake_core.h"
#include "xpu_fake.h"

// Not in the public headers: the launch entry point of nvcc (CUDA 13) stubs.
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                          size_t shmem, cudaStream_t stream);

namespace {

constexpr double kSlackMs = 1000.0;

void LaunchFake(uint64_t ns, cudaStream_t s) {
  void* args[] = {&ns};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                             args, 0, s),
            cudaSuccess);
}

float Elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  return ms;
}

// Sets the environment of the model and re-reads it.
void SetEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
  for (auto& [k, v] : vars) {
    if (v == nullptr) {
      unsetenv(k);
    } else {
      setenv(k, v, 1);
    }
  }
  xpu::fake::ReloadConfigForTesting();
}

TEST(FakeCudart, DevicePropertiesAndVersions) {
  SetEnv({{"XPU_FAKE_DEVICES", "2"}});
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 2);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
  EXPECT_STREQ(prop.name, "XPU Fake GPU");
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reset by the read
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int dev = -1;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(cudaSetDevice(5), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
  int v = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  ASSERT_EQ(cuDriverGetVersion(&v), CUDA_SUCCESS);
  EXPECT_EQ(v, 13000);
}

TEST(FakeCudart, EventsTimeAModelledKernel) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b, c;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&c), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  LaunchFake(30'000'000, s);  // 30 ms
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  LaunchFake(5'000, s);  // 5 us: the spinning path
  ASSERT_EQ(cudaEventRecord(c, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  float ab = Elapsed(a, b), bc = Elapsed(b, c);
  EXPECT_GE(ab, 30.0f);
  EXPECT_LT(ab, 30.0 + kSlackMs);
  EXPECT_GE(bc, 0.005f);
  EXPECT_LT(bc, 0.005 + kSlackMs);
  uint64_t ta = xpu::fake::EventStampNs(a), tb = xpu::fake::EventStampNs(b),
           tc = xpu::fake::EventStampNs(c);
  EXPECT_GT(ta, 0u);
  EXPECT_LE(ta, tb);
  EXPECT_LE(tb, tc);
  EXPECT_EQ(cudaEventDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(a), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(FakeCudart, EventNotReadyUntilTheStreamReachesIt) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, end;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // unrecorded
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);  // never recorded: complete, as in CUDA
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  LaunchFake(300'000'000, s);  // 300 ms
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not-ready is no error
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_GE(Elapsed(start, end), 300.0f);
}

TEST(FakeCudart, DisableTimingEventsCannotBeTimed) {
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreateWithFlags(&a, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  float ms;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
}

TEST(FakeCudart, CrossStreamWaitOrdersWork) {
  cudaStream_t s1, s2;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s2), cudaSuccess);
  cudaEvent_t produced, s2_start, consumed;
  ASSERT_EQ(cudaEventCreate(&produced), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&s2_start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&consumed), cudaSuccess);
  LaunchFake(100'000'000, s1);  // 100 ms on s1
  ASSERT_EQ(cudaEventRecord(produced, s1), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(s2_start, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, produced, 0), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(consumed, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
  // s2 finished only after s1 reached `produced`, ~100 ms after s2 started.
  EXPECT_EQ(cudaEventQuery(produced), cudaSuccess);
  EXPECT_LE(xpu::fake::EventStampNs(produced), xpu::fake::EventStampNs(consumed));
  EXPECT_GE(Elapsed(s2_start, consumed), 90.0f);
}

TEST(FakeCudart, GraphCaptureRecordsAndReplays) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaStreamCaptureStatus st;
  ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
  EXPECT_EQ(st, cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
  EXPECT_EQ(st, cudaStreamCaptureStatusActive);
  unsigned long long id = 0;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &st, &id), cudaSuccess);
  EXPECT_NE(id, 0u);
  int* data = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), sizeof(int)), cudaSuccess);
  *data = 0;
  // Captured work does not run: a 10 s kernel would make the query below
  // NotReady and the host function would run.
  LaunchFake(10'000'000'000ull, s);
  auto incr = [](void* p) { ++*static_cast<int*>(p); };
  ASSERT_EQ(cudaLaunchHostFunc(s, incr, data), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t g;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(*data, 0);
  ASSERT_EQ(cudaGraphDestroy(g), cudaSuccess);

  // A graph of 3 x 20 ms kernels + increment, launched twice.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  for (int i = 0; i < 3; ++i) LaunchFake(20'000'000, s);
  ASSERT_EQ(cudaLaunchHostFunc(s, incr, data), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(*data, 2);
  EXPECT_GE(Elapsed(a, b), 120.0f);
  EXPECT_LT(Elapsed(a, b), 120.0 + kSlackMs);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaFree(data), cudaSuccess);
}

TEST(FakeCudart, MemoryCopiesAreRealAndOrdered) {
  constexpr size_t kN = 1 << 16;
  char *d1, *d2;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d1), kN), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d2), kN), cudaSuccess);
  std::vector<char> host(kN), back(kN, 0);
  for (size_t i = 0; i < kN; ++i) host[i] = static_cast<char>(i * 7);
  ASSERT_EQ(cudaMemcpy(d1, host.data(), kN, cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  LaunchFake(50'000'000, s);  // the async copies queue behind this
  ASSERT_EQ(cudaMemsetAsync(d2, 0x5a, kN, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d2, d1, kN / 2, cudaMemcpyDeviceToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d2, kN, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(back[kN - 1], 0);  // not yet executed
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(memcmp(back.data(), host.data(), kN / 2), 0);
  EXPECT_EQ(back[kN / 2], 0x5a);
  EXPECT_EQ(back[kN - 1], 0x5a);
  EXPECT_EQ(cudaFree(d1), cudaSuccess);
  EXPECT_EQ(cudaFree(d1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d2), cudaSuccess);
}

TEST(FakeCudart, BadHandlesReturnErrors) {
  auto bogus = reinterpret_cast<cudaStream_t>(0xdeadbeef);
  EXPECT_EQ(cudaStreamSynchronize(bogus), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamQuery(bogus), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                             nullptr, 0, bogus),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventQuery(reinterpret_cast<cudaEvent_t>(0x1234)),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(0x42), 1, 1, 1, 1, 1, 1, 0, nullptr,
                           nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  cublasHandle_t h = reinterpret_cast<cublasHandle_t>(0x99);
  EXPECT_EQ(cublasSetStream(h, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  int n = 0;
  EXPECT_EQ(ncclCommCount(reinterpret_cast<ncclComm_t>(0x77), &n), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 1, ncclFloat, ncclSum,
                          reinterpret_cast<ncclComm_t>(0x77), nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(cublasLtMatmulDescDestroy(reinterpret_cast<cublasLtMatmulDesc_t>(0x55)),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtMatmul(reinterpret_cast<cublasLtHandle_t>(0x66), nullptr, nullptr, nullptr,
                           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                           nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(FakeDriver, FunctionsNamesAndProcAddress) {
  const char* name = nullptr;
  ASSERT_EQ(cudaFuncGetName(&name, reinterpret_cast<const void*>(&xpu_fake_kernel)), cudaSuccess);
  EXPECT_STREQ(name, "xpu_fake_kernel");
  cudaFunction_t fn;
  ASSERT_EQ(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(&xpu_fake_kernel)),
            cudaSuccess);
  ASSERT_EQ(cuFuncGetName(&name, reinterpret_cast<CUfunction>(fn)), CUDA_SUCCESS);
  EXPECT_STREQ(name, "xpu_fake_kernel");

  void* p = nullptr;
  CUdriverProcAddressQueryResult q;
  ASSERT_EQ(cuGetProcAddress("cuLaunchKernel", &p, 13000, 0, &q), CUDA_SUCCESS);
  EXPECT_EQ(q, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(p, reinterpret_cast<void*>(&cuLaunchKernel));
  ASSERT_EQ(cuGetProcAddress("cuStreamDestroy", &p, 13000, 0, &q), CUDA_SUCCESS);
  EXPECT_EQ(p, reinterpret_cast<void*>(&cuStreamDestroy_v2));
  EXPECT_EQ(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, &q), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  cudaDriverEntryPointQueryResult r;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 13000, 0, &r), cudaSuccess);
  EXPECT_EQ(p, reinterpret_cast<void*>(&cuLaunchKernel));

  // A launch through the driver API obeys the duration argument too.
  CUstream s;
  ASSERT_EQ(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  CUevent a, b;
  ASSERT_EQ(cuEventCreate(&a, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&b, 0), CUDA_SUCCESS);
  uint64_t ns = 40'000'000;
  void* params[] = {&ns};
  ASSERT_EQ(cuEventRecord(a, s), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(fn), 1, 1, 1, 1, 1, 1, 0, s, params,
                           nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuEventRecord(b, s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(s), CUDA_SUCCESS);
  float ms = 0;
  ASSERT_EQ(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  EXPECT_GE(ms, 40.0f);
  EXPECT_LT(ms, 40.0 + kSlackMs);
  EXPECT_EQ(xpu_fake_call_count("cuLaunchKernel"), 1u);  // each test runs in its own process
}

TEST(FakeCudart, KernelHandlesFromCudaGetKernelLaunchThroughTheStubEntryPoint) {
  cudaKernel_t k = nullptr;
  ASSERT_EQ(cudaGetKernel(&k, reinterpret_cast<const void*>(&xpu_fake_kernel)), cudaSuccess);
  const char* name = nullptr;
  ASSERT_EQ(cuKernelGetName(&name, reinterpret_cast<CUkernel>(k)), CUDA_SUCCESS);
  EXPECT_STREQ(name, "xpu_fake_kernel");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  uint64_t ns = 25'000'000;
  void* args[] = {&ns};
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(__cudaLaunchKernel(k, dim3(1), dim3(1), args, 0, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_GE(Elapsed(a, b), 25.0f);
  EXPECT_LT(Elapsed(a, b), 25.0 + kSlackMs);
  EXPECT_EQ(__cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(0x10), dim3(1), dim3(1), args, 0, s),
            cudaErrorInvalidDeviceFunction);
}

TEST(FakeCudart, Memcpy2DAndSymbolsCopyBytes) {
  char src[4][8], dst[4][16] = {};
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) src[r][c] = static_cast<char>(r * 8 + c + 1);
  }
  ASSERT_EQ(cudaMemcpy2D(dst, 16, src, 8, 8, 4, cudaMemcpyDefault), cudaSuccess);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(memcmp(dst[r], src[r], 8), 0);
    EXPECT_EQ(dst[r][8], 0);
  }
  EXPECT_EQ(cudaMemcpy2D(dst, 4, src, 8, 8, 4, cudaMemcpyDefault), cudaErrorInvalidPitchValue);
  static int symbol[4] = {};
  int in[2] = {7, 9}, out[2] = {};
  ASSERT_EQ(cudaMemcpyToSymbol(symbol, in, sizeof(in), sizeof(int), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(symbol[1], 7);
  EXPECT_EQ(symbol[2], 9);
  ASSERT_EQ(cudaMemcpyFromSymbol(out, symbol, sizeof(out), sizeof(int), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 9);
}

TEST(FakeCudart, DefaultKernelDurationComesFromTheEnvironment) {
  SetEnv({{"XPU_FAKE_KERNEL_NS", "60000000"}});  // 60 ms
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t a, b;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  // Any host function other than xpu_fake_kernel: its arguments are ignored.
  uint64_t ignored = 1;
  void* args[] = {&ignored};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&LaunchFake), dim3(1), dim3(1), args,
                             0, s),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_GE(Elapsed(a, b), 60.0f);
  EXPECT_LT(Elapsed(a, b), 60.0 + kSlackMs);
}

// Modelled GEMM time in ms for the current environment.
double GemmMs(double m, double n, double k, double batch, double tflops, double factor) {
  return 2.0 * m * n * k * batch / (tflops * 1e12) * 1e3 * factor;
}

float TimeGemm(cublasHandle_t h, cudaStream_t s, int m, int n, int k, int batch) {
  cudaEvent_t a, b;
  EXPECT_EQ(cudaEventCreate(&a), cudaSuccess);
  EXPECT_EQ(cudaEventCreate(&b), cudaSuccess);
  float alpha = 1, beta = 0;
  EXPECT_EQ(cudaEventRecord(a, s), cudaSuccess);
  if (batch == 1) {
    EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, nullptr, CUDA_R_16BF, m,
                           nullptr, CUDA_R_16BF, k, &beta, nullptr, CUDA_R_16BF, m,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
  } else {
    EXPECT_EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, nullptr, m,
                                        0, nullptr, k, 0, &beta, nullptr, m, 0, batch),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(cudaEventRecord(b, s), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(b), cudaSuccess);
  return Elapsed(a, b);
}

TEST(FakeCublas, GemmTimeScalesWithFlops) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"}, {"RANK", "2"}, {"XPU_FAKE_SLOW_RANKS", "1,3"}});
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got;
  ASSERT_EQ(cublasGetStream(h, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, s);
  const double small = GemmMs(512, 512, 512, 1, 0.1, 1);    // 2.7 ms
  const double large = GemmMs(1024, 1024, 1024, 1, 0.1, 1); // 21.5 ms
  const double batched = GemmMs(512, 512, 512, 16, 0.1, 1); // 43 ms
  float t_small = TimeGemm(h, s, 512, 512, 512, 1);
  float t_large = TimeGemm(h, s, 1024, 1024, 1024, 1);
  float t_batched = TimeGemm(h, s, 512, 512, 512, 16);
  EXPECT_GE(t_small, small);
  EXPECT_LT(t_small, small + kSlackMs);
  EXPECT_GE(t_large, large);
  EXPECT_LT(t_large, large + kSlackMs);
  EXPECT_GE(t_batched, batched);
  EXPECT_LT(t_batched, batched + kSlackMs);
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, nullptr, nullptr, CUDA_R_16BF, 1,
                         nullptr, CUDA_R_16BF, 1, nullptr, nullptr, CUDA_R_16BF, 1,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(FakeCublas, SlowRankFactorAppliesOnlyToListedRanks) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"},
          {"RANK", "3"},
          {"XPU_FAKE_SLOW_RANKS", "1,3"},
          {"XPU_FAKE_SLOW_GEMM_FACTOR", "4"}});
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const double base = GemmMs(1024, 1024, 1024, 1, 0.1, 1);  // 21.5 ms
  float slow = TimeGemm(h, nullptr, 1024, 1024, 1024, 1);
  EXPECT_GE(slow, 4 * base);
  EXPECT_LT(slow, 4 * base + kSlackMs);
  SetEnv({{"RANK", "2"}});
  float fast = TimeGemm(h, nullptr, 1024, 1024, 1024, 1);
  EXPECT_GE(fast, base);
  EXPECT_LT(fast, base + kSlackMs);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(FakeCublasLt, MatmulShapeFromLayoutsAndTranspose) {
  SetEnv({{"XPU_FAKE_TFLOPS", "0.1"}, {"RANK", nullptr}});
  cublasLtHandle_t lt;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasOperation_t t = CUBLAS_OP_T;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
            CUBLAS_STATUS_SUCCESS);
  int32_t got = -1;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &got, sizeof(got),
                                           &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, CUBLAS_OP_T);
  EXPECT_EQ(written, sizeof(got));
  // D[1024 x 512] = op(A)[1024 x 2048] * B[2048 x 512], A stored 2048 x 1024.
  cublasLtMatrixLayout_t a, b, d;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, 2048, 1024, 2048), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, 2048, 512, 2048), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, 1024, 512, 1024), CUBLAS_STATUS_SUCCESS);
  int32_t batch = 2;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                             sizeof(batch)),
            CUBLAS_STATUS_SUCCESS);
  uint64_t rows = 0;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows),
                                             &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 2048u);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  float alpha = 1, beta = 0;
  ASSERT_EQ(cudaEventRecord(e0, s), cudaSuccess);
  ASSERT_EQ(cublasLtMatmul(lt, desc, &alpha, nullptr, a, nullptr, b, &beta, nullptr, d, nullptr,
                           d, nullptr, nullptr, 0, s),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaEventRecord(e1, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const double modelled = GemmMs(1024, 512, 2048, 2, 0.1, 1);  // 43 ms
  EXPECT_GE(Elapsed(e0, e1), modelled);
  EXPECT_LT(Elapsed(e0, e1), modelled + kSlackMs);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(b), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(d), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

// --- NCCL, several ranks as threads of this process ------------------------

// Runs body(rank, comm, stream) on `n` threads that share one communicator,
// then destroys it (unless `destroy` is false: the body then owns teardown).
template <typename Body>
void WithRanks(int n, Body body, bool destroy = true) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm;
      ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess);
      cudaStream_t s;
      ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
      body(r, comm, s);
      if (destroy) {
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(FakeNccl, AllReduceStartsAtLastArrivalAndTakesModelledTime) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "1"}, {"RANK", nullptr}});
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  constexpr size_t kCount = 25'000'000;  // 100 MB of float
  // nccl-tests: time = size * 2(n-1)/n / busbw = 100e6 * 1 / 1e9 s = 100 ms.
  constexpr double kModelMs = 100.0;
  uint64_t before[2] = {}, after[2] = {};
  WithRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) {
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comm, &me), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(me, r);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // late rank
    cudaEvent_t a, b;
    ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, kCount, ncclFloat32, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    before[r] = xpu::fake::EventStampNs(a);
    after[r] = xpu::fake::EventStampNs(b);
  });
  // Both ranks end no earlier than the late rank's arrival + modelled time;
  // the early rank therefore waited for the late one.
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(after[r], before[1] + static_cast<uint64_t>(kModelMs * 1e6)) << "rank " << r;
    EXPECT_LT(after[r], before[1] + static_cast<uint64_t>((kModelMs + kSlackMs) * 1e6));
  }
  EXPECT_GE(after[0] - before[0], static_cast<uint64_t>((kModelMs + 150) * 1e6));
}

TEST(FakeNccl, SlowLinkRankSlowsItsCollectives) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "1"},
          {"RANK", nullptr},
          {"XPU_FAKE_SLOW_LINK_RANKS", "1"},
          {"XPU_FAKE_SLOW_LINK_FACTOR", "3"}});
  // Broadcast of 20 MB: factor 1 -> 20 ms, x3 on the slow link = 60 ms.
  float ms[2] = {};
  WithRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) {
    cudaEvent_t a, b;
    ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
    ASSERT_EQ(ncclBroadcast(nullptr, nullptr, 1, ncclInt8, 0, comm, s), ncclSuccess);  // align
    ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
    ASSERT_EQ(ncclBcast(nullptr, 20'000'000, ncclUint8, 0, comm, s), ncclSuccess);
    ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ms[r] = Elapsed(a, b);
  });
  for (float m : ms) {
    EXPECT_GE(m, 60.0f);
    EXPECT_LT(m, 60.0 + kSlackMs);
  }
}

TEST(FakeNccl, GroupedRingSendRecvDoesNotDeadlock) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  constexpr int kRanks = 3;
  WithRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t s) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(nullptr, 1024, ncclFloat, (r + 1) % kRanks, comm, s), ncclSuccess);
      ASSERT_EQ(ncclRecv(nullptr, 1024, ncclFloat, (r + kRanks - 1) % kRanks, comm, s),
                ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    }
    ASSERT_EQ(ncclAllGather(nullptr, nullptr, 1024, ncclFloat, comm, s), ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(nullptr, nullptr, 1024, ncclFloat, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(ncclSend(nullptr, 1, ncclFloat, kRanks, comm, s), ncclInvalidArgument);
  });
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

TEST(FakeNccl, MissingRankBlocksUntilAbort) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) {
    if (r == 1) {  // never calls the collective
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      return;
    }
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, comm, s), ncclSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // blocked inside the "kernel"
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    // Abort releases the blocked op; the handle is dead afterwards.
    ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);
  }, /*destroy=*/false);
}

TEST(FakeNccl, SplitByColor) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(4, [&](int r, ncclComm_t comm, cudaStream_t s) {
    ncclComm_t sub = nullptr;
    // Keys reverse the order inside each color.
    ASSERT_EQ(ncclCommSplit(comm, r % 2, -r, &sub, nullptr), ncclSuccess);
    ASSERT_NE(sub, nullptr);
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(me, r < 2 ? 1 : 0);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, sub, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ncclComm_t none = reinterpret_cast<ncclComm_t>(0x1);
    ASSERT_EQ(ncclCommSplit(comm, r == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &none, nullptr),
              ncclSuccess);
    EXPECT_EQ(none == nullptr, r != 0);
    if (none != nullptr) {
      EXPECT_EQ(ncclCommDestroy(none), ncclSuccess);
    }
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(FakeNccl, ShrinkExcludesRanksWithoutThem) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(4, [&](int r, ncclComm_t comm, cudaStream_t s) {
    if (r == 1) return;  // the excluded rank never calls shrink
    int exclude[] = {1};
    ncclComm_t sub = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &sub, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess);
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(me, r == 0 ? 0 : r - 1);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, sub, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(FakeNccl, InitAllCreatesOneCommPerDevice) {
  SetEnv({{"XPU_FAKE_DEVICES", "2"}, {"RANK", nullptr}});
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess);
  for (int i = 0; i < 2; ++i) {
    int dev = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[i], &dev), ncclSuccess);
    EXPECT_EQ(dev, i);
    EXPECT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
  }
}

TEST(FakeRuntime, CountsApiCalls) {
  unsigned long long before = xpu_fake_call_count("cudaStreamQuery");
  cudaStreamQuery(nullptr);
  cudaStreamQuery(nullptr);
  EXPECT_EQ(xpu_fake_call_count("cudaStreamQuery"), before + 2);
  EXPECT_EQ(xpu_fake_call_count("cudaNoSuchApi"), 0u);
}

}  // namespace
