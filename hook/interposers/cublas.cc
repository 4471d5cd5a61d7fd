// hook/interposers/cublas.cc — interposers for the cuBLAS GEMM entry points
// (libcublas.so.13). Every GEMM is traced with a signature of kind
// XPU_OP_GEMM named by the API, carrying m/n/k/batch, transposes, operand,
// output and compute types; the sampler in the core decides whether a given
// occurrence is timed, and a sampled one launched by a thread holding the GIL
// gets its Python call site (py_callsite.h).
//
// Names: cublas_v2.h maps cublasSgemm -> cublasSgemm_v2 and
// cublasGetStream -> cublasGetStream_v2 by macro; this file always spells
// the exported _v2 names so the macros cannot rename a definition. The
// unsuffixed cublasSgemm/cublasDgemm symbols that libcublas also exports are
// the legacy cublas.h API (void return, implicit handle) and are not
// interposed. The _64 (ILP64) variants exported by CUDA 13 are.
//
// Kernels that cuBLAS launches inside a traced GEMM pass through the runtime
// and driver interposers untouched: this layer holds the reentrancy guard.
//
// Thread-safety: stateless apart from the function-local caches of real
// symbols (thread-safe static initialisation); callable from any thread.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cublas_v2.h>

#include <cstdint>
#include <cstring>

#include "hook/core_api.h"
#include "hook/interposers/launch_tracing.h"
#include "hook/interposers/signature_fields.h"

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

// XPU_REAL_FN with an explicit pointer type: in C++ cublas_api.h overloads
// the *Ex GEMMs with inline wrappers taking a cudaDataType compute type, so
// decltype(&cublasGemmEx) would be ambiguous.
#define XPU_REAL_FN_AS(lib, fn, FnPtr)                                                     \
  ([]() -> FnPtr {                                                                         \
    static FnPtr real_ =                                                                   \
        reinterpret_cast<FnPtr>(::xpu::hook::ResolveReal(::xpu::hook::Library::lib, #fn)); \
    return real_;                                                                          \
  }())

namespace xpu::hook {
namespace {

// Returned when the real symbol cannot be resolved.
constexpr cublasStatus_t kMissing = CUBLAS_STATUS_NOT_INITIALIZED;

struct GemmShape {
  int transa;
  int transb;
  int64_t m, n, k, batch;
  uint8_t dtype, out_dtype, compute_type;
};

template <size_t N, typename Call>
inline cublasStatus_t TraceGemm(const ReentrancyGuard& g, cublasHandle_t handle,
                                const char (&name)[N], const GemmShape& s, Call call) {
  if (!g.entered() || !Active()) return call();
  EnsureStarted();
  // A non-launch query: takes no lock in cuBLAS and only reads the handle.
  cudaStream_t stream = nullptr;
  auto get_stream = XPU_REAL_FN(kCublas, cublasGetStream_v2);
  if (get_stream == nullptr || get_stream(handle, &stream) != CUBLAS_STATUS_SUCCESS) {
    stream = nullptr;
  }
  xpu_signature_v1 sig = MakeSignature(XPU_OP_GEMM);
  sig.m = Dim(s.m);
  sig.n = Dim(s.n);
  sig.k = Dim(s.k);
  sig.batch = s.batch < 1 ? 1 : Dim(s.batch);
  sig.gemm_flags = GemmFlags(s.transa, s.transb);
  sig.dtype = s.dtype;
  sig.out_dtype = s.out_dtype;
  sig.compute_type = s.compute_type;
  const uint32_t sig_id = InternSignature(sig, name, N - 1);
  if (sig_id == 0) return call();
  return TraceGpuCallWithCallsite(sig_id, stream, 0, 0, call);
}

}  // namespace
}  // namespace xpu::hook

using xpu::hook::GemmShape;
using xpu::hook::ReentrancyGuard;

// Typed GEMMs: C = op(A) op(B), all operands of one type. IntT is int for the
// LP64 API and int64_t for the _64 API.
#define XPU_TYPED_GEMM(fn, T, IntT, xdt)                                                         \
  XPU_EXPORT cublasStatus_t fn(cublasHandle_t handle, cublasOperation_t transa,                  \
                               cublasOperation_t transb, IntT m, IntT n, IntT k, const T* alpha, \
                               const T* A, IntT lda, const T* B, IntT ldb, const T* beta, T* C,  \
                               IntT ldc) {                                                       \
    ReentrancyGuard g;                                                                           \
    auto real = XPU_REAL_FN(kCublas, fn);                                                        \
    if (!real) return xpu::hook::kMissing;                                                       \
    const GemmShape s{transa, transb, m, n, k, 1, xdt, xdt, xdt};                                \
    return xpu::hook::TraceGemm(g, handle, #fn, s, [&] {                                         \
      return real(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);         \
    });                                                                                          \
  }

#define XPU_TYPED_GEMM_STRIDED(fn, T, IntT, xdt)                                                  \
  XPU_EXPORT cublasStatus_t fn(                                                                   \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, IntT m, IntT n,  \
      IntT k, const T* alpha, const T* A, IntT lda, long long int strideA, const T* B, IntT ldb,  \
      long long int strideB, const T* beta, T* C, IntT ldc, long long int strideC, IntT batch) {  \
    ReentrancyGuard g;                                                                            \
    auto real = XPU_REAL_FN(kCublas, fn);                                                         \
    if (!real) return xpu::hook::kMissing;                                                        \
    const GemmShape s{transa, transb, m, n, k, batch, xdt, xdt, xdt};                             \
    return xpu::hook::TraceGemm(g, handle, #fn, s, [&] {                                          \
      return real(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, \
                  C, ldc, strideC, batch);                                                        \
    });                                                                                           \
  }

XPU_TYPED_GEMM(cublasSgemm_v2, float, int, XPU_DT_F32)
XPU_TYPED_GEMM(cublasSgemm_v2_64, float, int64_t, XPU_DT_F32)
XPU_TYPED_GEMM(cublasDgemm_v2, double, int, XPU_DT_F64)
XPU_TYPED_GEMM(cublasDgemm_v2_64, double, int64_t, XPU_DT_F64)
XPU_TYPED_GEMM(cublasHgemm, __half, int, XPU_DT_F16)
XPU_TYPED_GEMM(cublasHgemm_64, __half, int64_t, XPU_DT_F16)

XPU_TYPED_GEMM_STRIDED(cublasSgemmStridedBatched, float, int, XPU_DT_F32)
XPU_TYPED_GEMM_STRIDED(cublasSgemmStridedBatched_64, float, int64_t, XPU_DT_F32)
XPU_TYPED_GEMM_STRIDED(cublasDgemmStridedBatched, double, int, XPU_DT_F64)
XPU_TYPED_GEMM_STRIDED(cublasDgemmStridedBatched_64, double, int64_t, XPU_DT_F64)
XPU_TYPED_GEMM_STRIDED(cublasHgemmStridedBatched, __half, int, XPU_DT_F16)
XPU_TYPED_GEMM_STRIDED(cublasHgemmStridedBatched_64, __half, int64_t, XPU_DT_F16)

// Mixed-precision GEMMs: dtype = A's type (cuBLAS requires A and B to
// match), out_dtype = C's type, compute_type from cublasComputeType_t.
#define XPU_GEMM_EX(fn, IntT)                                                                    \
  XPU_EXPORT cublasStatus_t fn(                                                                  \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, IntT m, IntT n, \
      IntT k, const void* alpha, const void* A, cudaDataType Atype, IntT lda, const void* B,     \
      cudaDataType Btype, IntT ldb, const void* beta, void* C, cudaDataType Ctype, IntT ldc,     \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo) {                                  \
    using FnPtr = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, IntT, \
                                     IntT, IntT, const void*, const void*, cudaDataType, IntT,   \
                                     const void*, cudaDataType, IntT, const void*, void*,        \
                                     cudaDataType, IntT, cublasComputeType_t, cublasGemmAlgo_t); \
    ReentrancyGuard g;                                                                           \
    auto real = XPU_REAL_FN_AS(kCublas, fn, FnPtr);                                              \
    if (!real) return xpu::hook::kMissing;                                                       \
    const GemmShape s{transa,                                                                    \
                      transb,                                                                    \
                      m,                                                                         \
                      n,                                                                         \
                      k,                                                                         \
                      1,                                                                         \
                      xpu::hook::CudaDataTypeToXpu(Atype),                                       \
                      xpu::hook::CudaDataTypeToXpu(Ctype),                                       \
                      xpu::hook::ComputeTypeToXpu(computeType)};                                 \
    return xpu::hook::TraceGemm(g, handle, #fn, s, [&] {                                         \
      return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, \
                  Ctype, ldc, computeType, algo);                                                \
    });                                                                                          \
  }

#define XPU_GEMM_BATCHED_EX(fn, IntT)                                                              \
  XPU_EXPORT cublasStatus_t fn(                                                                    \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, IntT m, IntT n,   \
      IntT k, const void* alpha, const void* const Aarray[], cudaDataType Atype, IntT lda,         \
      const void* const Barray[], cudaDataType Btype, IntT ldb, const void* beta,                  \
      void* const Carray[], cudaDataType Ctype, IntT ldc, IntT batchCount,                         \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo) {                                    \
    using FnPtr =                                                                                  \
        cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, IntT, IntT, IntT, \
                           const void*, const void* const*, cudaDataType, IntT,                    \
                           const void* const*, cudaDataType, IntT, const void*, void* const*,      \
                           cudaDataType, IntT, IntT, cublasComputeType_t, cublasGemmAlgo_t);       \
    ReentrancyGuard g;                                                                             \
    auto real = XPU_REAL_FN_AS(kCublas, fn, FnPtr);                                                \
    if (!real) return xpu::hook::kMissing;                                                         \
    const GemmShape s{transa,                                                                      \
                      transb,                                                                      \
                      m,                                                                           \
                      n,                                                                           \
                      k,                                                                           \
                      batchCount,                                                                  \
                      xpu::hook::CudaDataTypeToXpu(Atype),                                         \
                      xpu::hook::CudaDataTypeToXpu(Ctype),                                         \
                      xpu::hook::ComputeTypeToXpu(computeType)};                                   \
    return xpu::hook::TraceGemm(g, handle, #fn, s, [&] {                                           \
      return real(handle, transa, transb, m, n, k, alpha, Aarray, Atype, lda, Barray, Btype, ldb,  \
                  beta, Carray, Ctype, ldc, batchCount, computeType, algo);                        \
    });                                                                                            \
  }

#define XPU_GEMM_STRIDED_BATCHED_EX(fn, IntT)                                                     \
  XPU_EXPORT cublasStatus_t fn(                                                                   \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, IntT m, IntT n,  \
      IntT k, const void* alpha, const void* A, cudaDataType Atype, IntT lda,                     \
      long long int strideA, const void* B, cudaDataType Btype, IntT ldb, long long int strideB,  \
      const void* beta, void* C, cudaDataType Ctype, IntT ldc, long long int strideC,             \
      IntT batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {                  \
    using FnPtr = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, IntT,  \
                                     IntT, IntT, const void*, const void*, cudaDataType, IntT,    \
                                     long long int, const void*, cudaDataType, IntT,              \
                                     long long int, const void*, void*, cudaDataType, IntT,       \
                                     long long int, IntT, cublasComputeType_t, cublasGemmAlgo_t); \
    ReentrancyGuard g;                                                                            \
    auto real = XPU_REAL_FN_AS(kCublas, fn, FnPtr);                                               \
    if (!real) return xpu::hook::kMissing;                                                        \
    const GemmShape s{transa,                                                                     \
                      transb,                                                                     \
                      m,                                                                          \
                      n,                                                                          \
                      k,                                                                          \
                      batchCount,                                                                 \
                      xpu::hook::CudaDataTypeToXpu(Atype),                                        \
                      xpu::hook::CudaDataTypeToXpu(Ctype),                                        \
                      xpu::hook::ComputeTypeToXpu(computeType)};                                  \
    return xpu::hook::TraceGemm(g, handle, #fn, s, [&] {                                          \
      return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,  \
                  strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);          \
    });                                                                                           \
  }

XPU_GEMM_EX(cublasGemmEx, int)
XPU_GEMM_EX(cublasGemmEx_64, int64_t)
XPU_GEMM_BATCHED_EX(cublasGemmBatchedEx, int)
XPU_GEMM_BATCHED_EX(cublasGemmBatchedEx_64, int64_t)
XPU_GEMM_STRIDED_BATCHED_EX(cublasGemmStridedBatchedEx, int)
XPU_GEMM_STRIDED_BATCHED_EX(cublasGemmStridedBatchedEx_64, int64_t)
