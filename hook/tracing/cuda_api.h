// hook/tracing/cuda_api.h — the real CUDA functions the hook core itself
// calls (events, capture check, device, stream holds). Resolved once through
// ResolveReal so that the hook's own calls never reach its own interposers; a
// table of pointers (not direct calls) also lets tests inject fakes.
//
// The launch path prefers the driver API (cuEventRecord, cuStreamIsCapturing)
// over the runtime's wrappers: same handles (a cudaEvent_t is a CUevent, a
// cudaStream_t a CUstream, with the same special values), one layer less per
// call. The driver needs the context current on the calling thread; a thread
// that has not made a runtime call yet has none, and on any driver error the
// runtime function (which makes the primary context current, and has the
// final word) is called instead. The driver pointers are optional: absent
// (tests, an old driver), the runtime functions are used.
//
// Thread-safety: immutable after ResolveCudaApi; published by the runtime with
// a release store before the launch path reads it.
#ifndef XPU_HOOK_TRACING_CUDA_API_H_
#define XPU_HOOK_TRACING_CUDA_API_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>

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

  // Optional; resolved later than the rest (libcuda is loaded by the
  // runtime's initialisation, after libcudart), by ResolveDriverApi, hence
  // atomics: null until then, then a valid function, never anything else.
  using CuEventRecordFn = CUresult (*)(CUevent, CUstream);
  using CuEventQueryFn = CUresult (*)(CUevent);
  using CuIsCapturingFn = CUresult (*)(CUstream, CUstreamCaptureStatus*);
  using CuWaitValue32Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  std::atomic<CuEventRecordFn> cu_event_record{nullptr};
  std::atomic<CuEventQueryFn> cu_event_query{nullptr};
  std::atomic<CuIsCapturingFn> cu_stream_is_capturing{nullptr};
  // cuStreamWaitValue32_v2 and mapped pinned memory: stream holds
  // (stream_hold.h); without them timed ops get no hold.
  std::atomic<CuWaitValue32Fn> cu_stream_wait_value32{nullptr};
  // Loading and launching the hook's own calibration kernel (gpu_clock.h,
  // event overhead); background thread only.
  using CuModuleLoadDataFn = CUresult (*)(CUmodule*, const void*);
  using CuModuleGetFunctionFn = CUresult (*)(CUfunction*, CUmodule, const char*);
  using CuLaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**, void**);
  std::atomic<CuModuleLoadDataFn> cu_module_load_data{nullptr};
  std::atomic<CuModuleGetFunctionFn> cu_module_get_function{nullptr};
  std::atomic<CuLaunchKernelFn> cu_launch_kernel{nullptr};
  decltype(&cudaHostAlloc) host_alloc = nullptr;
  decltype(&cudaHostGetDevicePointer) host_get_device_pointer = nullptr;

  bool Complete() const {
    return get_device && set_device && event_create && event_destroy && event_record &&
           event_query && event_synchronize && event_elapsed && stream_create &&
           stream_is_capturing;
  }
  bool CanHold() const {
    return cu_stream_wait_value32.load(std::memory_order_relaxed) != nullptr &&
           host_alloc != nullptr && host_get_device_pointer != nullptr;
  }

  // Records `event` on `stream` (launch path).
  cudaError_t Record(cudaEvent_t event, const void* stream) const {
    cudaStream_t s = const_cast<cudaStream_t>(static_cast<const CUstream_st*>(stream));
    if (CuEventRecordFn f = cu_event_record.load(std::memory_order_relaxed)) {
      if (f(reinterpret_cast<CUevent>(event), s) == CUDA_SUCCESS) return cudaSuccess;
    }
    return event_record(event, s);
  }
  // cudaSuccess, cudaErrorNotReady, or another error.
  cudaError_t Query(cudaEvent_t event) const {
    if (CuEventQueryFn f = cu_event_query.load(std::memory_order_relaxed)) {
      const CUresult r = f(reinterpret_cast<CUevent>(event));
      if (r == CUDA_SUCCESS) return cudaSuccess;
      if (r == CUDA_ERROR_NOT_READY) return cudaErrorNotReady;
    }
    return event_query(event);
  }
  // True when `stream` is capturing, or when that cannot be told (a failed
  // query, e.g. the legacy stream during a global capture): recording into
  // it must then be avoided.
  bool Capturing(const void* stream) const {
    cudaStream_t s = const_cast<cudaStream_t>(static_cast<const CUstream_st*>(stream));
    if (CuIsCapturingFn f = cu_stream_is_capturing.load(std::memory_order_relaxed)) {
      CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
      if (f(s, &st) == CUDA_SUCCESS) return st != CU_STREAM_CAPTURE_STATUS_NONE;
    }
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    return stream_is_capturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone;
  }
};

// Fills the runtime part of `api` from the real libcudart
// (hook/process/real_symbols.cc). Returns Complete(). Calls dlsym:
// background/once-only paths only.
bool ResolveCudaApi(CudaApi* api);
// Fills the optional driver part once libcuda is loaded (background thread,
// after the runtime initialised a device). Missing symbols are not counted:
// they are optional. Returns true when libcuda was found.
bool ResolveDriverApi(CudaApi* api);

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_CUDA_API_H_
