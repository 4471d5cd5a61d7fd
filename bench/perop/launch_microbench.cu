// bench/perop/launch_microbench.cu — CPU time per launch on a real GPU, from
// C++ with nothing else in the loop: the resolution perop_bench.py's PyTorch
// loops cannot reach (a PyTorch op costs 5-25 us with microseconds of noise;
// the hook's untraced launch path is meant to cost nanoseconds).
//
//   nvcc -O2 -shared -Xcompiler -fPIC -cudart shared -o liblaunch_microbench.so \
//        launch_microbench.cu -ldl
//
// perop_bench.py runs it in a process per configuration, through ctypes (the
// GIL is released during the call), one loop per call so that a failing loop
// costs only its own figure:
//   int xpu_launch_microbench(const char* loop, int batches, int batch,
//                             char* out, int out_len)
// runs `loop` ("kernel", "gemm" or "allreduce") and writes one JSON object,
// per call, min and median over batches: {"gemm": {"min_ns": .., "median_ns": ..}}.
// Returns 0, -1 without a GPU, -2 when the library is missing, -3 for an
// unknown loop.
//
// Loops (the calling thread, one non-blocking stream; the stream is
// synchronized between batches, outside the timed region, so the launch
// queue never fills):
//   kernel      an empty kernel through <<<>>> (__cudaLaunchKernel): the
//               untraced plain-launch path
//   gemm        cublasGemmEx, bf16 64x64x64: a traced op (first 32
//               occurrences timed, then 1 in 16 under XPU_TIMING=sampled)
//   allreduce   ncclAllReduce of 1024 floats on a one-rank communicator:
//               a traced collective
// cuBLAS and NCCL are opened by soname with RTLD_GLOBAL (PyTorch has them
// loaded already) and called through the global symbol scope, as an
// application linked against them would, so a preloaded hook sees the calls.
// The runtime is the shared libcudart (-cudart shared): a static one would
// never reach the hook. A library that cannot be opened leaves its loop out.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#ifndef XPU_MICROBENCH_NO_KERNEL  // a host compiler build, for the GPU-less runtime
__global__ void Empty() {}
#endif

// The few cuBLAS / NCCL declarations needed (their ABI is stable), so that
// the benchmark builds without their development headers.
using CublasHandle = void*;
using CublasCreateFn = int (*)(CublasHandle*);
using CublasSetStreamFn = int (*)(CublasHandle, cudaStream_t);
using CublasGemmExFn = int (*)(CublasHandle, int, int, int, int, int, const void*, const void*,
                               int, int, const void*, int, int, const void*, void*, int, int, int,
                               int);
constexpr int kCublasOpN = 0, kCudaR16BF = 14, kCublasCompute32F = 68, kCublasGemmDefault = -1;
struct NcclUniqueId {
  char internal[128];
};
using NcclComm = void*;
using NcclGetUniqueIdFn = int (*)(NcclUniqueId*);
using NcclCommInitRankFn = int (*)(NcclComm*, int, NcclUniqueId, int);
using NcclAllReduceFn = int (*)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t);
constexpr int kNcclFloat32 = 7, kNcclSum = 0;

template <typename T>
T Global(const char* name) {
  return reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Call>
bool Measure(const char* name, int batches, int batch, cudaStream_t s, Call call,
             std::string* json) {
  // Warm-up: first-use costs (symbol resolution, the hook's signatures,
  // event pool and background thread) stay out of the figures.
  for (int i = 0; i < batch; ++i) {
    if (!call()) return false;
  }
  cudaStreamSynchronize(s);
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    const uint64_t t0 = NowNs();
    for (int i = 0; i < batch; ++i) call();
    per_call.push_back(double(NowNs() - t0) / batch);
    cudaStreamSynchronize(s);
  }
  std::sort(per_call.begin(), per_call.end());
  char buf[160];
  snprintf(buf, sizeof(buf), "%s\"%s\": {\"min_ns\": %.1f, \"median_ns\": %.1f}",
           json->empty() ? "" : ", ", name, per_call.front(), per_call[per_call.size() / 2]);
  *json += buf;
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int xpu_launch_microbench(const char* loop,
                                                                          int batches, int batch,
                                                                          char* out, int out_len) {
  static cudaStream_t s = nullptr;
  static void* buf = nullptr;
  static CublasHandle h = nullptr;
  static CublasGemmExFn gemm = nullptr;
  static NcclComm comm = nullptr;
  static NcclAllReduceFn all_reduce = nullptr;
  if (s == nullptr && (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
                       cudaMalloc(&buf, 1 << 20) != cudaSuccess)) {
    s = nullptr;
    return -1;
  }
  const std::string which = loop != nullptr ? loop : "";
  std::string json;
  if (which == "kernel") {
#ifndef XPU_MICROBENCH_NO_KERNEL
    Measure("kernel", batches, batch, s,
            [] {
              Empty<<<1, 1, 0, s>>>();
              return true;
            },
            &json);
#endif
  } else if (which == "gemm") {
    if (gemm == nullptr && dlopen("libcublas.so.13", RTLD_NOW | RTLD_GLOBAL) != nullptr) {
      auto create = Global<CublasCreateFn>("cublasCreate_v2");
      auto set_stream = Global<CublasSetStreamFn>("cublasSetStream_v2");
      gemm = Global<CublasGemmExFn>("cublasGemmEx");
      if (!create || !set_stream || !gemm || create(&h) != 0 || set_stream(h, s) != 0) {
        gemm = nullptr;
      }
    }
    if (gemm == nullptr) return -2;
    static const float alpha = 1, beta = 0;
    Measure("gemm", batches, batch, s,
            [] {
              return gemm(h, kCublasOpN, kCublasOpN, 64, 64, 64, &alpha, buf, kCudaR16BF, 64, buf,
                          kCudaR16BF, 64, &beta, buf, kCudaR16BF, 64, kCublasCompute32F,
                          kCublasGemmDefault) == 0;
            },
            &json);
  } else if (which == "allreduce") {
    if (all_reduce == nullptr && dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL) != nullptr) {
      auto get_id = Global<NcclGetUniqueIdFn>("ncclGetUniqueId");
      auto init = Global<NcclCommInitRankFn>("ncclCommInitRank");
      all_reduce = Global<NcclAllReduceFn>("ncclAllReduce");
      NcclUniqueId id;
      if (!get_id || !init || !all_reduce || get_id(&id) != 0 || init(&comm, 1, id, 0) != 0) {
        all_reduce = nullptr;
      }
    }
    if (all_reduce == nullptr) return -2;
    Measure("allreduce", batches, batch, s,
            [] { return all_reduce(buf, buf, 1024, kNcclFloat32, kNcclSum, comm, s) == 0; },
            &json);
  } else {
    return -3;
  }
  snprintf(out, static_cast<size_t>(out_len), "{%s}", json.c_str());
  return 0;
}
