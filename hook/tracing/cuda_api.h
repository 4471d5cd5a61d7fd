// hook/tracing/cuda_api.h — the real CUDA runtime functions the hook core
// itself calls (events, capture check, device). Resolved once through
// ResolveReal so that the hook's own calls never reach its own interposers; a
// table of pointers (not direct calls) also lets tests inject fakes.
// Thread-safety: immutable after ResolveCudaApi; published by the runtime with
// a release store before the launch path reads it.
#ifndef XPU_HOOK_TRACING_CUDA_API_H_
#define XPU_HOOK_TRACING_CUDA_API_H_

#include <cuda_runtime_api.h>

namespace xpu::hook {

struct CudaApi {
  decltype(&cudaGetDevice) get_device = nullptr;
  decltype(&cudaSetDevice) set_device = nullptr;
  decltype(&cudaEventCreateWithFlags) event_create = nullptr;
  decltype(&cudaEventDestroy) event_destroy = nullptr;
  decltype(&cudaEventRecord) event_record = nullptr;
  decltype(&cudaEventQuery) event_query = nullptr;
  decltype(&cudaEventSynchronize) event_synchronize = nullptr;
  decltype(&cudaEventElapsedTime) event_elapsed = nullptr;
  decltype(&cudaStreamCreateWithFlags) stream_create = nullptr;
  decltype(&cudaStreamIsCapturing) stream_is_capturing = nullptr;

  bool Complete() const {
    return get_device && set_device && event_create && event_destroy && event_record &&
           event_query && event_synchronize && event_elapsed && stream_create &&
           stream_is_capturing;
  }
};

// Fills `api` from the real libcudart (hook/process/real_symbols.cc). Returns Complete().
// Calls dlsym: background/once-only paths only.
bool ResolveCudaApi(CudaApi* api);

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_CUDA_API_H_
