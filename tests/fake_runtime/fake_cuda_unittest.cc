// tests/fake_runtime/fake_cuda_unittest.cc — unit tests of the fake
// libcudart and libcuda through their public C APIs: devices, errors,
// streams, events, capture and graphs, memory, kernel functions, driver entry
// points, call counting. Timing conventions: fake_test_util.h.
// Thread-safety: single-threaded tests.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "fake_core.h"
#include "fake_test_util.h"
#include "xpu_fake.h"

// Not in the public headers: the launch entry point of nvcc (CUDA 13) stubs.
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                          size_t shmem, cudaStream_t stream);

namespace {

using xpu::fake::testing::Elapsed;
using xpu::fake::testing::kSlackMs;
using xpu::fake::testing::LaunchFake;
using xpu::fake::testing::SetEnv;

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
  LaunchFake(1'500'000'000, s);  // 1.5 s: the checks below run well within it
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not-ready is no error
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_GE(Elapsed(start, end), 1500.0f);
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
  cudaEvent_t s1_start, produced, consumed;
  ASSERT_EQ(cudaEventCreate(&s1_start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&produced), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&consumed), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(s1_start, s1), cudaSuccess);
  LaunchFake(100'000'000, s1);  // 100 ms on s1
  ASSERT_EQ(cudaEventRecord(produced, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, produced, 0), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(consumed, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
  // Syncing s2 alone waited for s1's kernel: s2 reached `consumed` only
  // after s1 reached `produced`, at least 100 ms after s1 started.
  EXPECT_EQ(cudaEventQuery(produced), cudaSuccess);
  EXPECT_LE(xpu::fake::EventStampNs(produced), xpu::fake::EventStampNs(consumed));
  EXPECT_GE(xpu::fake::EventStampNs(consumed), xpu::fake::EventStampNs(s1_start) + 100'000'000);
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
  LaunchFake(1'000'000'000, s);  // the async copies queue behind this 1 s kernel
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
  EXPECT_EQ(cudaEventQuery(reinterpret_cast<cudaEvent_t>(0x1234)), cudaErrorInvalidResourceHandle);
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
  ASSERT_EQ(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(&xpu_fake_kernel)), cudaSuccess);
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
  ASSERT_EQ(
      cuLaunchKernel(reinterpret_cast<CUfunction>(fn), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr),
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
  ASSERT_EQ(
      cudaLaunchKernel(reinterpret_cast<const void*>(&LaunchFake), dim3(1), dim3(1), args, 0, s),
      cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_GE(Elapsed(a, b), 60.0f);
  EXPECT_LT(Elapsed(a, b), 60.0 + kSlackMs);
}

// Modelled GEMM time in ms for the current environment.

TEST(FakeRuntime, CountsApiCalls) {
  unsigned long long before = xpu_fake_call_count("cudaStreamQuery");
  cudaStreamQuery(nullptr);
  cudaStreamQuery(nullptr);
  EXPECT_EQ(xpu_fake_call_count("cudaStreamQuery"), before + 2);
  EXPECT_EQ(xpu_fake_call_count("cudaNoSuchApi"), 0u);
}

}  // namespace
