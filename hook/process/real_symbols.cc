// hook/process/real_symbols.cc — ResolveReal: finds the real library function
// behind an interposed name. Called once per symbol (XPU_REAL_FN caches), never
// on the per-call path. Thread-safety: reentrant; dlsym/dlopen take the loader
// lock internally.
#include <dlfcn.h>

#include "hook/core_api.h"
#include "hook/tracing/cuda_api.h"

namespace xpu::hook {
namespace {

const char* const kCudartNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so", nullptr};
const char* const kCudaNames[] = {"libcuda.so.1", "libcuda.so", nullptr};
const char* const kCublasNames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", nullptr};
const char* const kCublasLtNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so",
                                      nullptr};
const char* const kNcclNames[] = {"libnccl.so.2", "libnccl.so", nullptr};

const char* const* SonamesOf(Library lib) {
  switch (lib) {
    case Library::kCudart:
      return kCudartNames;
    case Library::kCuda:
      return kCudaNames;
    case Library::kCublas:
      return kCublasNames;
    case Library::kCublasLt:
      return kCublasLtNames;
    case Library::kNccl:
      return kNcclNames;
  }
  return kCudartNames;
}

// Base address of this library, to reject our own interposers (RTLD_NOLOAD
// lookups search the handle's dependency scope, which can include us).
const void* OwnBase() {
  static const void* base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&OwnBase), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

bool IsOurs(void* p) {
  Dl_info info{};
  return dladdr(p, &info) != 0 && info.dli_fbase == OwnBase();
}

}  // namespace

void* ResolveReal(Library lib, const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p != nullptr && !IsOurs(p)) return p;
  // Python extension modules load libcudart RTLD_LOCAL: invisible to
  // RTLD_NEXT, but reachable through its own handle.
  for (const char* const* so = SonamesOf(lib); *so != nullptr; ++so) {
    void* h = dlopen(*so, RTLD_NOLOAD | RTLD_LAZY);
    if (h == nullptr) continue;
    p = dlsym(h, name);
    dlclose(h);  // drops only the reference NOLOAD added
    if (p != nullptr && !IsOurs(p)) return p;
  }
  Count(XPU_CNT_SYMBOL_MISSING);
  return nullptr;
}

bool ResolveCudaApi(CudaApi* api) {
  auto get = [](const char* n) { return ResolveReal(Library::kCudart, n); };
  api->get_device = reinterpret_cast<decltype(api->get_device)>(get("cudaGetDevice"));
  api->set_device = reinterpret_cast<decltype(api->set_device)>(get("cudaSetDevice"));
  api->event_create =
      reinterpret_cast<decltype(api->event_create)>(get("cudaEventCreateWithFlags"));
  api->event_destroy = reinterpret_cast<decltype(api->event_destroy)>(get("cudaEventDestroy"));
  api->event_record = reinterpret_cast<decltype(api->event_record)>(get("cudaEventRecord"));
  api->event_query = reinterpret_cast<decltype(api->event_query)>(get("cudaEventQuery"));
  api->event_synchronize =
      reinterpret_cast<decltype(api->event_synchronize)>(get("cudaEventSynchronize"));
  api->event_elapsed = reinterpret_cast<decltype(api->event_elapsed)>(get("cudaEventElapsedTime"));
  api->stream_create =
      reinterpret_cast<decltype(api->stream_create)>(get("cudaStreamCreateWithFlags"));
  api->stream_is_capturing =
      reinterpret_cast<decltype(api->stream_is_capturing)>(get("cudaStreamIsCapturing"));
  api->host_alloc = reinterpret_cast<decltype(api->host_alloc)>(get("cudaHostAlloc"));
  api->host_get_device_pointer = reinterpret_cast<decltype(api->host_get_device_pointer)>(
      get("cudaHostGetDevicePointer"));
  return api->Complete();
}

bool ResolveDriverApi(CudaApi* api) {
  void* h = nullptr;
  for (const char* const* so = SonamesOf(Library::kCuda); *so != nullptr && h == nullptr; ++so) {
    h = dlopen(*so, RTLD_NOLOAD | RTLD_LAZY);
  }
  if (h == nullptr) return false;
  auto get = [h](const char* n) -> void* {
    void* p = dlsym(h, n);
    return p != nullptr && !IsOurs(p) ? p : nullptr;
  };
  api->cu_event_record.store(reinterpret_cast<CudaApi::CuEventRecordFn>(get("cuEventRecord")),
                             std::memory_order_relaxed);
  api->cu_event_query.store(reinterpret_cast<CudaApi::CuEventQueryFn>(get("cuEventQuery")),
                            std::memory_order_relaxed);
  api->cu_stream_is_capturing.store(
      reinterpret_cast<CudaApi::CuIsCapturingFn>(get("cuStreamIsCapturing")),
      std::memory_order_relaxed);
  api->cu_stream_wait_value32.store(
      reinterpret_cast<CudaApi::CuWaitValue32Fn>(get("cuStreamWaitValue32_v2")),
      std::memory_order_relaxed);
  api->cu_module_load_data.store(
      reinterpret_cast<CudaApi::CuModuleLoadDataFn>(get("cuModuleLoadData")),
      std::memory_order_relaxed);
  api->cu_module_get_function.store(
      reinterpret_cast<CudaApi::CuModuleGetFunctionFn>(get("cuModuleGetFunction")),
      std::memory_order_relaxed);
  api->cu_launch_kernel.store(
      reinterpret_cast<CudaApi::CuLaunchKernelFn>(get("cuLaunchKernel")),
      std::memory_order_relaxed);
  dlclose(h);  // drops only the reference NOLOAD added
  return true;
}

}  // namespace xpu::hook
