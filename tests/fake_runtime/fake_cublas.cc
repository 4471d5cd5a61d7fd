// tests/fake_runtime/fake_cublas.cc — test double of libcublas.so.13.
//
// Model: a handle remembers its stream; every GEMM validates its arguments
// and enqueues one "kernel" on that stream lasting
//   2*m*n*k*batch / (XPU_FAKE_TFLOPS * 1e12) s  (x XPU_FAKE_SLOW_GEMM_FACTOR
// when RANK is in XPU_FAKE_SLOW_RANKS, x XPU_FAKE_MISALIGNED_FACTOR when m,
// n or k is not a multiple of 64: cuBLAS's slower kernels for a misaligned
// shape, fake_core.h). No arithmetic is done on the
// matrices: tests need timing, not products. The GEMM does not go through the
// public cudaLaunchKernel, so an interposer sees exactly the cuBLAS call, as
// with the real library.
//
// Thread-safety: handles live in a mutex-guarded registry; a handle's stream
// is atomic, so one handle may be used from several threads (cuBLAS itself
// asks callers not to; the double does not need to be stricter).
#include <cublas_v2.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "fake_core.h"

namespace fk = xpu::fake;

struct cublasContext {
  std::atomic<cudaStream_t> stream{nullptr};
  std::atomic<int> math_mode{CUBLAS_DEFAULT_MATH};
  int device = 0;
};

namespace {

std::mutex& HandleMu() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_set<cublasHandle_t>& Handles() {
  static auto* s = new std::unordered_set<cublasHandle_t>;
  return *s;
}
bool Valid(cublasHandle_t h) {
  std::lock_guard<std::mutex> lock(HandleMu());
  return Handles().count(h) != 0;
}

cublasStatus_t Gemm(cublasHandle_t h, int m, int n, int k, long long batch) {
  if (!Valid(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;  // nothing to do
  fk::Stream* s = fk::ResolveStream(h->stream.load());
  if (s == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;
  uint64_t ns = fk::GemmDurationNs(m, n, k, static_cast<uint64_t>(batch));
  // What a profiler sees; real cuBLAS names its kernels by tile and layout.
  const char* kernel = batch > 1 ? "xpu_fake_gemm_batched_kernel" : "xpu_fake_gemm_kernel";
  return fk::EnqueueKernel(s, ns, kernel) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                                         : CUBLAS_STATUS_EXECUTION_FAILED;
}

const char* StatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  XPU_FAKE_COUNT_CALL();
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* h = new cublasContext;
  h->device = fk::CurrentDevice();
  std::lock_guard<std::mutex> lock(HandleMu());
  Handles().insert(h);
  *handle = h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  XPU_FAKE_COUNT_CALL();
  std::lock_guard<std::mutex> lock(HandleMu());
  if (!Handles().erase(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version) {
  XPU_FAKE_COUNT_CALL();
  if (version == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *version = CUBLAS_VERSION;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  XPU_FAKE_COUNT_CALL();
  if (!Valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream.store(streamId);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
  XPU_FAKE_COUNT_CALL();
  if (!Valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (streamId == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *streamId = handle->stream.load();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace,
                                     size_t workspaceSizeInBytes) {
  XPU_FAKE_COUNT_CALL();
  return Valid(handle) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  XPU_FAKE_COUNT_CALL();
  if (!Valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->math_mode.store(mode);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  XPU_FAKE_COUNT_CALL();
  if (!Valid(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = static_cast<cublasMath_t>(handle->math_mode.load());
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  XPU_FAKE_COUNT_CALL();
  return StatusName(status);
}

const char* cublasGetStatusName(cublasStatus_t status) {
  XPU_FAKE_COUNT_CALL();
  return StatusName(status);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, 1);
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const double* alpha,
                              const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, 1);
}

cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const __half* alpha,
                           const __half* A, int lda, const __half* B, int ldb, const __half* beta,
                           __half* C, int ldc) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, batchCount);
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const double* alpha, const double* A, int lda,
                                         long long int strideA, const double* B, int ldb,
                                         long long int strideB, const double* beta, double* C,
                                         int ldc, long long int strideC, int batchCount) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, batchCount);
}

cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const __half* alpha, const __half* A, int lda,
                                         long long int strideA, const __half* B, int ldb,
                                         long long int strideB, const __half* beta, __half* C,
                                         int ldc, long long int strideC, int batchCount) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, batchCount);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, 1);
}

cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                   const void* const Aarray[], cudaDataType Atype, int lda,
                                   const void* const Barray[], cudaDataType Btype, int ldb,
                                   const void* beta, void* const Carray[], cudaDataType Ctype,
                                   int ldc, int batchCount, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t algo) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, batchCount);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  XPU_FAKE_COUNT_CALL();
  return Gemm(handle, m, n, k, batchCount);
}

}  // extern "C"
