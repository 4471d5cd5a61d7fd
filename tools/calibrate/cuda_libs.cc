#include "tools/calibrate/cuda_libs.h"

#include <dlfcn.h>
#include <glob.h>

#include "absl/strings/str_cat.h"

namespace xpu::calibrate {
namespace {

// Candidate paths of `soname` under the --lib-dir directories, in order.
std::vector<std::string> Candidates(const std::vector<std::string>& dirs,
                                    const std::string& soname) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    out.push_back(absl::StrCat(d, "/", soname));
    glob_t g{};
    if (glob(absl::StrCat(d, "/*/lib/", soname).c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    }
    globfree(&g);
  }
  out.push_back(soname);  // the loader's own search
  return out;
}

void* Open(const std::vector<std::string>& dirs, const std::string& soname, std::string* path,
           std::string* error) {
  for (const std::string& p : Candidates(dirs, soname)) {
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      // Report where the loader found it, not just the soname.
      Dl_info info{};
      void* any = dlsym(h, soname.find("nccl") != std::string::npos       ? "ncclGetVersion"
                           : soname.find("cublasLt") != std::string::npos ? "cublasLtCreate"
                           : soname.find("cublas") != std::string::npos   ? "cublasCreate_v2"
                                                                          : "cudaGetDeviceCount");
      *path = any != nullptr && dladdr(any, &info) != 0 && info.dli_fname ? info.dli_fname : p;
      return h;
    }
    const char* e = dlerror();
    if (error->empty() && e != nullptr) *error = e;
  }
  return nullptr;
}

template <class Fn>
bool Sym(void* h, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(h, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

}  // namespace

std::string CudaLibs::CudaError(cudaError_t e) const {
  const char* s = error_string != nullptr ? error_string(e) : nullptr;
  return absl::StrCat("CUDA error ", static_cast<int>(e), s ? absl::StrCat(": ", s) : "");
}

absl::StatusOr<CudaLibs> LoadCudaLibs(const std::vector<std::string>& lib_dirs,
                                      std::vector<std::string>* notes) {
  CudaLibs l;
  std::string err, missing;
  void* rt = Open(lib_dirs, "libcudart.so.13", &l.cudart_path, &err);
  if (rt == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot load libcudart.so.13 (", err,
                                            "); pass --lib-dir DIR (a CUDA lib64 directory, or a "
                                            "PyTorch virtualenv's site-packages/nvidia) "
                                            "or set LD_LIBRARY_PATH"));
  }
  Sym(rt, "cudaGetDeviceCount", &l.get_device_count, &missing);
  Sym(rt, "cudaSetDevice", &l.set_device, &missing);
  Sym(rt, "cudaGetDeviceProperties", &l.get_device_properties, &missing);
  Sym(rt, "cudaRuntimeGetVersion", &l.runtime_get_version, &missing);
  Sym(rt, "cudaGetErrorString", &l.error_string, &missing);
  Sym(rt, "cudaMalloc", &l.malloc, &missing);
  Sym(rt, "cudaFree", &l.free, &missing);
  Sym(rt, "cudaMemcpy", &l.memcpy, &missing);
  Sym(rt, "cudaMemset", &l.memset, &missing);
  Sym(rt, "cudaStreamCreate", &l.stream_create, &missing);
  Sym(rt, "cudaStreamDestroy", &l.stream_destroy, &missing);
  Sym(rt, "cudaStreamSynchronize", &l.stream_synchronize, &missing);
  Sym(rt, "cudaEventCreate", &l.event_create, &missing);
  Sym(rt, "cudaEventDestroy", &l.event_destroy, &missing);
  Sym(rt, "cudaEventRecord", &l.event_record, &missing);
  Sym(rt, "cudaEventSynchronize", &l.event_synchronize, &missing);
  Sym(rt, "cudaEventElapsedTime", &l.event_elapsed, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(l.cudart_path, " lacks ", missing));
  }

  err.clear();
  if (void* lt = Open(lib_dirs, "libcublasLt.so.13", &l.cublaslt_path, &err)) {
    missing.clear();
    Sym(lt, "cublasLtCreate", &l.lt_create, &missing);
    Sym(lt, "cublasLtDestroy", &l.lt_destroy, &missing);
    Sym(lt, "cublasLtMatmulDescCreate", &l.lt_desc_create, &missing);
    Sym(lt, "cublasLtMatmulDescDestroy", &l.lt_desc_destroy, &missing);
    Sym(lt, "cublasLtMatmulDescSetAttribute", &l.lt_desc_set, &missing);
    Sym(lt, "cublasLtMatrixLayoutCreate", &l.lt_layout_create, &missing);
    Sym(lt, "cublasLtMatrixLayoutDestroy", &l.lt_layout_destroy, &missing);
    Sym(lt, "cublasLtMatmulPreferenceCreate", &l.lt_pref_create, &missing);
    Sym(lt, "cublasLtMatmulPreferenceDestroy", &l.lt_pref_destroy, &missing);
    Sym(lt, "cublasLtMatmulPreferenceSetAttribute", &l.lt_pref_set, &missing);
    Sym(lt, "cublasLtMatmulAlgoGetHeuristic", &l.lt_heuristic, &missing);
    Sym(lt, "cublasLtMatmul", &l.lt_matmul, &missing);
    if (!missing.empty()) {
      notes->push_back(absl::StrCat(l.cublaslt_path, " lacks ", missing, ": not used"));
      l.lt_matmul = nullptr;
    }
  } else {
    notes->push_back(absl::StrCat("libcublasLt.so.13 not found (", err, ")"));
  }
  err.clear();
  if (void* b = Open(lib_dirs, "libcublas.so.13", &l.cublas_path, &err)) {
    missing.clear();
    Sym(b, "cublasCreate_v2", &l.blas_create, &missing);
    Sym(b, "cublasDestroy_v2", &l.blas_destroy, &missing);
    Sym(b, "cublasSetStream_v2", &l.blas_set_stream, &missing);
    Sym(b, "cublasGemmEx", &l.blas_gemm_ex, &missing);
    if (!missing.empty()) {
      notes->push_back(absl::StrCat(l.cublas_path, " lacks ", missing, ": not used"));
      l.blas_gemm_ex = nullptr;
    }
  } else if (!l.has_lt()) {
    notes->push_back(absl::StrCat("libcublas.so.13 not found (", err, "): no GEMM calibration"));
  }
  err.clear();
  if (void* n = Open(lib_dirs, "libnccl.so.2", &l.nccl_path, &err)) {
    missing.clear();
    Sym(n, "ncclGetVersion", &l.nccl_get_version, &missing);
    Sym(n, "ncclGetErrorString", &l.nccl_error_string, &missing);
    Sym(n, "ncclCommInitAll", &l.nccl_comm_init_all, &missing);
    Sym(n, "ncclCommDestroy", &l.nccl_comm_destroy, &missing);
    Sym(n, "ncclGroupStart", &l.nccl_group_start, &missing);
    Sym(n, "ncclGroupEnd", &l.nccl_group_end, &missing);
    Sym(n, "ncclAllReduce", &l.nccl_all_reduce, &missing);
    Sym(n, "ncclAllGather", &l.nccl_all_gather, &missing);
    Sym(n, "ncclReduceScatter", &l.nccl_reduce_scatter, &missing);
    if (!missing.empty()) {
      notes->push_back(
          absl::StrCat(l.nccl_path, " lacks ", missing, ": no collective calibration"));
      l.nccl_all_reduce = nullptr;
    }
  } else {
    notes->push_back(absl::StrCat("libnccl.so.2 not found (", err, "): no collective calibration"));
  }
  return l;
}

}  // namespace xpu::calibrate
