// cuda_libs — the CUDA runtime, cuBLASLt / cuBLAS and NCCL functions that
// xpu-calibrate calls, found at run time with dlopen/dlsym so that the tool
// has no link-time CUDA dependency and runs against whatever libraries the
// node has (a CUDA toolkit, or a PyTorch virtualenv's
// site-packages/nvidia/*/lib), and against the GPU-less test runtime.
//
// Search order for each soname (libcudart.so.13, libcublasLt.so.13,
// libcublas.so.13, libnccl.so.2): every --lib-dir DIR as DIR/soname, then
// DIR/*/lib/soname (the PyTorch wheel layout: pass .../site-packages/nvidia),
// then the dynamic loader's own search (LD_LIBRARY_PATH, rpath, ld.so.cache).
// Libraries are loaded RTLD_GLOBAL in dependency order (cudart, cuBLASLt,
// cuBLAS, NCCL) so that a wheel library finds the ones loaded before it.
// cudart is required; cuBLASLt (else cuBLAS) is needed for GEMMs, NCCL for
// collectives.
// Thread-safety: filled once by Load, then read-only.
#ifndef XPU_TOOLS_CALIBRATE_CUDA_LIBS_H_
#define XPU_TOOLS_CALIBRATE_CUDA_LIBS_H_

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xpu::calibrate {

struct CudaLibs {
  // Paths actually loaded ("" when absent).
  std::string cudart_path, cublaslt_path, cublas_path, nccl_path;

  // libcudart
  decltype(&cudaGetDeviceCount) get_device_count = nullptr;
  decltype(&cudaSetDevice) set_device = nullptr;
  decltype(&cudaGetDeviceProperties) get_device_properties = nullptr;
  decltype(&cudaRuntimeGetVersion) runtime_get_version = nullptr;
  decltype(&cudaGetErrorString) error_string = nullptr;
  // Explicit types where the C++ headers add overloads (templates, legacy
  // wrappers) that decltype cannot pick from.
  cudaError_t (*malloc)(void**, size_t) = nullptr;
  decltype(&cudaFree) free = nullptr;
  decltype(&cudaMemcpy) memcpy = nullptr;
  decltype(&cudaMemset) memset = nullptr;
  decltype(&cudaStreamCreate) stream_create = nullptr;
  decltype(&cudaStreamDestroy) stream_destroy = nullptr;
  decltype(&cudaStreamSynchronize) stream_synchronize = nullptr;
  cudaError_t (*event_create)(cudaEvent_t*) = nullptr;
  decltype(&cudaEventDestroy) event_destroy = nullptr;
  decltype(&cudaEventRecord) event_record = nullptr;
  decltype(&cudaEventSynchronize) event_synchronize = nullptr;
  decltype(&cudaEventElapsedTime) event_elapsed = nullptr;

  // libcublasLt (optional)
  decltype(&cublasLtCreate) lt_create = nullptr;
  decltype(&cublasLtDestroy) lt_destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) lt_desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) lt_desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) lt_desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) lt_layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) lt_layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) lt_pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) lt_pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) lt_pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) lt_heuristic = nullptr;
  decltype(&cublasLtMatmul) lt_matmul = nullptr;

  // libcublas (optional; used when cuBLASLt is missing)
  decltype(&cublasCreate_v2) blas_create = nullptr;
  decltype(&cublasDestroy_v2) blas_destroy = nullptr;
  decltype(&cublasSetStream_v2) blas_set_stream = nullptr;
  cublasStatus_t (*blas_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                 int, const void*, const void*, cudaDataType, int, const void*,
                                 cudaDataType, int, const void*, void*, cudaDataType, int,
                                 cublasComputeType_t, cublasGemmAlgo_t) = nullptr;

  // libnccl (optional)
  decltype(&ncclGetVersion) nccl_get_version = nullptr;
  decltype(&ncclGetErrorString) nccl_error_string = nullptr;
  decltype(&ncclCommInitAll) nccl_comm_init_all = nullptr;
  decltype(&ncclCommDestroy) nccl_comm_destroy = nullptr;
  decltype(&ncclGroupStart) nccl_group_start = nullptr;
  decltype(&ncclGroupEnd) nccl_group_end = nullptr;
  decltype(&ncclAllReduce) nccl_all_reduce = nullptr;
  decltype(&ncclAllGather) nccl_all_gather = nullptr;
  decltype(&ncclReduceScatter) nccl_reduce_scatter = nullptr;

  bool has_lt() const { return lt_matmul != nullptr; }
  bool has_blas() const { return blas_gemm_ex != nullptr; }
  bool has_nccl() const { return nccl_all_reduce != nullptr; }
  // "cudaErrorInvalidValue: invalid argument" style text.
  std::string CudaError(cudaError_t e) const;
};

// Loads the libraries (see the search order above). Fails when libcudart
// cannot be loaded or lacks a function; optional libraries that are absent
// or incomplete are left out (their pointers null) and noted in *notes.
absl::StatusOr<CudaLibs> LoadCudaLibs(const std::vector<std::string>& lib_dirs,
                                      std::vector<std::string>* notes);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_CUDA_LIBS_H_
