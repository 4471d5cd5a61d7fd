#include "tools/calibrate/gemm_bench.h"

#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace xpu::calibrate {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

struct DtypeSpec {
  cudaDataType_t ab;  // A and B
  cudaDataType_t cd;  // C and D
  cublasComputeType_t compute;
  size_t ab_size, cd_size;
};

bool SpecOf(const std::string& dtype, DtypeSpec* s) {
  if (dtype == "bf16") {
    *s = {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
  } else if (dtype == "fp16") {
    *s = {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2};
  } else if (dtype == "tf32") {
    *s = {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4};
  } else if (dtype == "fp32") {
    *s = {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4};
  } else if (dtype == "fp8") {
    *s = {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};
  } else {
    return false;
  }
  return true;
}

// Random values in [-1, 1] encoded as `type` (round toward zero; exact
// values do not matter, only that they are varied and finite).
std::vector<uint8_t> RandomData(cudaDataType_t type, size_t elements) {
  std::vector<uint8_t> out;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<float>(static_cast<double>(x >> 11) / static_cast<double>(1ull << 53) * 2.0 -
                              1.0);
  };
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  switch (type) {
    case CUDA_R_32F: {
      out.resize(elements * 4);
      for (size_t i = 0; i < elements; ++i) {
        const float f = next();
        std::memcpy(&out[i * 4], &f, 4);
      }
      break;
    }
    case CUDA_R_16BF: {
      out.resize(elements * 2);
      for (size_t i = 0; i < elements; ++i) {
        const uint16_t h = static_cast<uint16_t>(bits(next()) >> 16);
        std::memcpy(&out[i * 2], &h, 2);
      }
      break;
    }
    case CUDA_R_16F: {
      out.resize(elements * 2);
      for (size_t i = 0; i < elements; ++i) {
        const uint32_t u = bits(next());
        const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
        const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
        const uint16_t h =
            exp <= 0 ? sign : static_cast<uint16_t>(sign | (exp << 10) | ((u & 0x7fffff) >> 13));
        std::memcpy(&out[i * 2], &h, 2);
      }
      break;
    }
    default: {  // FP8 E4M3: bias 7; |v| <= 1 keeps the exponent <= 7
      out.resize(elements);
      for (size_t i = 0; i < elements; ++i) {
        const uint32_t u = bits(next());
        const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 7;
        const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
        out[i] = exp <= 0 ? sign : static_cast<uint8_t>(sign | (exp << 3) | ((u & 0x7fffff) >> 20));
      }
      break;
    }
  }
  return out;
}

// Device buffers and handles released on every path.
class Resources {
 public:
  explicit Resources(const CudaLibs& l) : l_(l) {}
  ~Resources() {
    if (stream_ != nullptr) l_.stream_synchronize(stream_);
    if (pref_ != nullptr) l_.lt_pref_destroy(pref_);
    for (cublasLtMatrixLayout_t d : layouts_) l_.lt_layout_destroy(d);
    if (desc_ != nullptr) l_.lt_desc_destroy(desc_);
    if (lt_ != nullptr) l_.lt_destroy(lt_);
    if (blas_ != nullptr) l_.blas_destroy(blas_);
    for (void* p : buffers_) l_.free(p);
    if (start_ != nullptr) l_.event_destroy(start_);
    if (stop_ != nullptr) l_.event_destroy(stop_);
    if (stream_ != nullptr) l_.stream_destroy(stream_);
  }
  absl::StatusOr<void*> Alloc(size_t bytes) {
    void* p = nullptr;
    cudaError_t e = l_.malloc(&p, bytes);
    if (e != cudaSuccess)
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaMalloc(", bytes, "): ", l_.CudaError(e)));
    buffers_.push_back(p);
    return p;
  }
  const CudaLibs& l_;
  std::vector<void*> buffers_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  std::vector<cublasLtMatrixLayout_t> layouts_;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasHandle_t blas_ = nullptr;
};

absl::Status Cuda(const CudaLibs& l, cudaError_t e, const char* what) {
  return e == cudaSuccess ? absl::OkStatus()
                          : absl::InternalError(absl::StrCat(what, ": ", l.CudaError(e)));
}
absl::Status Blas(cublasStatus_t s, const char* what) {
  return s == CUBLAS_STATUS_SUCCESS
             ? absl::OkStatus()
             : absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(s)));
}

}  // namespace

bool KnownGemmDtype(const std::string& dtype) {
  DtypeSpec s;
  return SpecOf(dtype, &s);
}

absl::StatusOr<GemmResult> MeasureGemm(const CudaLibs& l, int device, const std::string& dtype,
                                       uint32_t n, int warmup, int iters) {
  DtypeSpec spec;
  if (!SpecOf(dtype, &spec))
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", dtype));
  if (!l.has_lt() && !l.has_blas())
    return absl::NotFoundError("neither cuBLASLt nor cuBLAS is loaded");
  if (dtype == "fp8" && !l.has_lt()) return absl::UnimplementedError("fp8 needs cuBLASLt");
  if (n == 0 || iters < 1)
    return absl::InvalidArgumentError("GEMM size and iterations must be > 0");
  XPU_RETURN_IF_ERROR(Cuda(l, l.set_device(device), "cudaSetDevice"));
  if (dtype == "fp8") {
    cudaDeviceProp prop;
    std::memset(&prop, 0, sizeof(prop));
    XPU_RETURN_IF_ERROR(Cuda(l, l.get_device_properties(&prop, device), "cudaGetDeviceProperties"));
    if (prop.major * 10 + prop.minor < 89) {
      return absl::UnimplementedError(absl::StrCat("fp8 needs compute capability 8.9+, device has ",
                                                   prop.major, ".", prop.minor));
    }
  }
  Resources r(l);
  const size_t elems = static_cast<size_t>(n) * n;
  XPU_ASSIGN_OR_RETURN(void* const a, r.Alloc(elems * spec.ab_size));
  XPU_ASSIGN_OR_RETURN(void* const b, r.Alloc(elems * spec.ab_size));
  XPU_ASSIGN_OR_RETURN(void* const c, r.Alloc(elems * spec.cd_size));
  {
    const std::vector<uint8_t> host = RandomData(spec.ab, elems);
    XPU_RETURN_IF_ERROR(
        Cuda(l, l.memcpy(a, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy"));
    XPU_RETURN_IF_ERROR(
        Cuda(l, l.memcpy(b, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy"));
    XPU_RETURN_IF_ERROR(Cuda(l, l.memset(c, 0, elems * spec.cd_size), "cudaMemset"));
  }
  XPU_RETURN_IF_ERROR(Cuda(l, l.stream_create(&r.stream_), "cudaStreamCreate"));
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_create(&r.start_), "cudaEventCreate"));
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_create(&r.stop_), "cudaEventCreate"));
  const float alpha = 1.0f, beta = 0.0f;
  const int64_t nn = n;
  std::function<absl::Status()> call;
  void* workspace = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic;
  if (l.has_lt()) {
    XPU_ASSIGN_OR_RETURN(workspace, r.Alloc(kWorkspaceBytes));
    XPU_RETURN_IF_ERROR(Blas(l.lt_create(&r.lt_), "cublasLtCreate"));
    XPU_RETURN_IF_ERROR(
        Blas(l.lt_desc_create(&r.desc_, spec.compute, CUDA_R_32F), "cublasLtMatmulDescCreate"));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    XPU_RETURN_IF_ERROR(
        Blas(l.lt_desc_set(r.desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "TRANSA"));
    XPU_RETURN_IF_ERROR(
        Blas(l.lt_desc_set(r.desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "TRANSB"));
    for (cudaDataType_t t : {spec.ab, spec.ab, spec.cd, spec.cd}) {
      cublasLtMatrixLayout_t layout = nullptr;
      XPU_RETURN_IF_ERROR(
          Blas(l.lt_layout_create(&layout, t, nn, nn, nn), "cublasLtMatrixLayoutCreate"));
      r.layouts_.push_back(layout);
    }
    XPU_RETURN_IF_ERROR(Blas(l.lt_pref_create(&r.pref_), "cublasLtMatmulPreferenceCreate"));
    const size_t ws_bytes = kWorkspaceBytes;
    XPU_RETURN_IF_ERROR(Blas(l.lt_pref_set(r.pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &ws_bytes, sizeof(ws_bytes)),
                             "workspace"));
    int found = 0;
    std::memset(&heuristic, 0, sizeof(heuristic));
    cublasStatus_t hs = l.lt_heuristic(r.lt_, r.desc_, r.layouts_[0], r.layouts_[1], r.layouts_[2],
                                       r.layouts_[3], r.pref_, 1, &heuristic, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found < 1) {
      return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", dtype, " ", n,
                                                   "^3 (status ", static_cast<int>(hs), ")"));
    }
    call = [&] {
      return Blas(l.lt_matmul(r.lt_, r.desc_, &alpha, a, r.layouts_[0], b, r.layouts_[1], &beta, c,
                              r.layouts_[2], c, r.layouts_[3], &heuristic.algo, workspace,
                              kWorkspaceBytes, r.stream_),
                  "cublasLtMatmul");
    };
  } else {
    XPU_RETURN_IF_ERROR(Blas(l.blas_create(&r.blas_), "cublasCreate"));
    XPU_RETURN_IF_ERROR(Blas(l.blas_set_stream(r.blas_, r.stream_), "cublasSetStream"));
    const int in = static_cast<int>(n);
    call = [&] {
      return Blas(
          l.blas_gemm_ex(r.blas_, CUBLAS_OP_T, CUBLAS_OP_N, in, in, in, &alpha, a, spec.ab, in, b,
                         spec.ab, in, &beta, c, spec.cd, in, spec.compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    };
  }
  for (int i = 0; i < warmup; ++i) XPU_RETURN_IF_ERROR(call());
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_record(r.start_, r.stream_), "cudaEventRecord"));
  for (int i = 0; i < iters; ++i) XPU_RETURN_IF_ERROR(call());
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_record(r.stop_, r.stream_), "cudaEventRecord"));
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_synchronize(r.stop_), "cudaEventSynchronize"));
  float ms = 0;
  XPU_RETURN_IF_ERROR(Cuda(l, l.event_elapsed(&ms, r.start_, r.stop_), "cudaEventElapsedTime"));
  if (!(ms > 0)) return absl::InternalError("the timed GEMMs took no measurable time");
  GemmResult out;
  out.ms_per_call = ms / iters;
  out.tflops = 2.0 * static_cast<double>(n) * n * n * iters / (ms * 1e-3) / 1e12;
  return out;
}

}  // namespace xpu::calibrate
