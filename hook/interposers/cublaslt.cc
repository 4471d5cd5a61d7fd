// hook/interposers/cublaslt.cc — interposer for cublasLtMatmul
// (libcublasLt.so.13), the GEMM path of PyTorch (addmm / bias-GELU epilogues,
// FP8 scaled_mm) and of Transformer Engine.
//
// The shape is not in the arguments: it is read back from the descriptors
// with the real cublasLtMatmulDescGetAttribute and
// cublasLtMatrixLayoutGetAttribute, which only read host memory.
//   m, n   = rows, cols of D's layout (cuBLAS column-major convention)
//   k      = cols of A's layout, rows if A is transposed
//   batch  = BATCH_COUNT of D's layout (>= 1)
//   dtype  = A's TYPE, out_dtype = D's TYPE, compute_type from COMPUTE_TYPE
// Layout ORDER (row-major, tiled) is not folded in: m/n/k describe the
// logical problem, which is what FLOP counting needs.
//
// Thread-safety: stateless apart from the function-local caches of real
// symbols; callable from any thread. Descriptors belong to the caller and
// are only read.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cublasLt.h>

#include <cstdint>

#include "hook/core_api.h"
#include "hook/interposers/launch_tracing.h"
#include "hook/interposers/signature_fields.h"

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace xpu::hook {
namespace {

// Shape of one cublasLtMatmul as recorded in its signature. Returns false
// when the descriptors cannot be read (the call is then passed through).
bool ReadLtMatmulShape(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
                       cublasLtMatrixLayout_t d_desc, xpu_signature_v1* sig) {
  auto desc_get = XPU_REAL_FN(kCublasLt, cublasLtMatmulDescGetAttribute);
  auto layout_get = XPU_REAL_FN(kCublasLt, cublasLtMatrixLayoutGetAttribute);
  if (desc_get == nullptr || layout_get == nullptr || desc == nullptr || a_desc == nullptr ||
      d_desc == nullptr) {
    return false;
  }
  size_t written = 0;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, compute = -1;
  // Missing attributes keep their documented defaults.
  desc_get(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa), &written);
  desc_get(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb), &written);
  if (desc_get(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute, sizeof(compute), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  uint64_t d_rows = 0, d_cols = 0, a_rows = 0, a_cols = 0;
  uint32_t a_type = 0, d_type = 0;
  int32_t batch = 1;
  if (layout_get(d_desc, CUBLASLT_MATRIX_LAYOUT_ROWS, &d_rows, sizeof(d_rows), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      layout_get(d_desc, CUBLASLT_MATRIX_LAYOUT_COLS, &d_cols, sizeof(d_cols), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      layout_get(a_desc, CUBLASLT_MATRIX_LAYOUT_ROWS, &a_rows, sizeof(a_rows), &written) !=
          CUBLAS_STATUS_SUCCESS ||
      layout_get(a_desc, CUBLASLT_MATRIX_LAYOUT_COLS, &a_cols, sizeof(a_cols), &written) !=
          CUBLAS_STATUS_SUCCESS) {
    return false;
  }
  layout_get(a_desc, CUBLASLT_MATRIX_LAYOUT_TYPE, &a_type, sizeof(a_type), &written);
  layout_get(d_desc, CUBLASLT_MATRIX_LAYOUT_TYPE, &d_type, sizeof(d_type), &written);
  layout_get(d_desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch), &written);

  const bool a_trans = transa == CUBLAS_OP_T || transa == CUBLAS_OP_C;
  sig->m = Dim(static_cast<int64_t>(d_rows));
  sig->n = Dim(static_cast<int64_t>(d_cols));
  sig->k = Dim(static_cast<int64_t>(a_trans ? a_rows : a_cols));
  sig->batch = batch < 1 ? 1 : static_cast<uint32_t>(batch);
  sig->gemm_flags = GemmFlags(transa, transb);
  sig->dtype = CudaDataTypeToXpu(static_cast<int>(a_type));
  sig->out_dtype = CudaDataTypeToXpu(static_cast<int>(d_type));
  sig->compute_type = ComputeTypeToXpu(compute);
  return true;
}

}  // namespace
}  // namespace xpu::hook

XPU_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t compute_desc,
                                         const void* alpha, const void* A,
                                         cublasLtMatrixLayout_t a_desc, const void* B,
                                         cublasLtMatrixLayout_t b_desc, const void* beta,
                                         const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                                         cublasLtMatrixLayout_t d_desc,
                                         const cublasLtMatmulAlgo_t* algo, void* workspace,
                                         size_t workspace_bytes, cudaStream_t stream) {
  xpu::hook::ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCublasLt, cublasLtMatmul);
  if (!real) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [&] {
    return real(handle, compute_desc, alpha, A, a_desc, B, b_desc, beta, C, c_desc, D, d_desc, algo,
                workspace, workspace_bytes, stream);
  };
  if (!g.entered() || !xpu::hook::Active()) return call();
  xpu::hook::EnsureStarted();
  xpu_signature_v1 sig = xpu::hook::MakeSignature(XPU_OP_GEMM);
  if (!xpu::hook::ReadLtMatmulShape(compute_desc, a_desc, d_desc, &sig)) return call();
  static constexpr char kName[] = "cublasLtMatmul";
  const uint32_t sig_id = xpu::hook::InternSignature(sig, kName, sizeof(kName) - 1);
  if (sig_id == 0) return call();
  // A sampled launch from a thread holding the GIL gets its Python call site.
  return xpu::hook::TraceGpuCallWithCallsite(sig_id, stream, 0, 0, call);
}
