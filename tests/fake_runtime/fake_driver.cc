// tests/fake_runtime/fake_driver.cc — test double of libcuda.so.1.
//
// The driver API subset used by the hook and the test programs, on the same
// fake_core model as the runtime double: a CUstream is a cudaStream_t, a
// CUevent a cudaEvent_t, a CUfunction the handle returned by
// cudaGetFuncBySymbol. Contexts are one static token per device.
// cuGetProcAddress resolves names in this library only (not through the
// global scope), like the real driver returns its own entry points even when
// an interposer is preloaded; "_v2" variants are preferred, as the versioned
// names are what CUDA 12+ callers ask for.
//
// Thread-safety: every function is safe to call from any thread.
#include <cuda.h>
#include <dlfcn.h>

#include <time.h>

#include <cstring>
#include <string>

#include "fake_core.h"

namespace fk = xpu::fake;

namespace {

// cudaError_t and CUresult agree on every code the core returns (0, 1, 2,
// 101, 400, 600, 801, 900...), except where mapped here.
CUresult ToCu(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return CUDA_SUCCESS;
    case cudaErrorInvalidValue:
      return CUDA_ERROR_INVALID_VALUE;
    case cudaErrorMemoryAllocation:
      return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInvalidDevice:
      return CUDA_ERROR_INVALID_DEVICE;
    case cudaErrorInvalidResourceHandle:
      return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorNotReady:
      return CUDA_ERROR_NOT_READY;
    case cudaErrorIllegalState:
      return CUDA_ERROR_ILLEGAL_STATE;
    case cudaErrorStreamCaptureUnsupported:
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    default:
      return CUDA_ERROR_UNKNOWN;
  }
}

struct Context {
  int device;
};
Context g_contexts[64];
thread_local bool t_ctx_set = false;

CUresult LaunchFn(CUfunction f, void** params, CUstream stream) {
  if (f == nullptr || !fk::IsFunction(f)) return CUDA_ERROR_INVALID_HANDLE;
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return ToCu(fk::EnqueueKernel(s, fk::KernelDurationNs(fk::FunctionHostFn(f), params),
                                fk::FunctionName(f)));
}

void* SelfHandle() {
  static void* self = [] {
    Dl_info info;
    void* h = nullptr;
    if (dladdr(reinterpret_cast<void*>(&SelfHandle), &info) != 0 && info.dli_fname != nullptr) {
      h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    return h;
  }();
  return self;
}

// Internal, so that the public variants do not call each other through the
// PLT (an interposer would see one call twice).
CUresult GetProcAddress(const char* symbol, void** pfn,
                        CUdriverProcAddressQueryResult* symbolStatus) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  void* self = SelfHandle();
  if (self != nullptr) {
    std::string v2 = std::string(symbol) + "_v2";
    *pfn = dlsym(self, v2.c_str());
    if (*pfn == nullptr) *pfn = dlsym(self, symbol);
  }
  if (symbolStatus) {
    *symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // namespace

// cuda.h renames these to their versioned symbols; the unversioned (legacy)
// symbols exist in the real driver as well.
#undef cuGetProcAddress
#undef cuEventElapsedTime

extern "C" {

CUresult cuInit(unsigned int Flags) {
  XPU_FAKE_COUNT_CALL();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* driverVersion) {
  XPU_FAKE_COUNT_CALL();
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  XPU_FAKE_COUNT_CALL();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = fk::GetConfig().devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  XPU_FAKE_COUNT_CALL();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= fk::GetConfig().devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  XPU_FAKE_COUNT_CALL();
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= fk::GetConfig().devices) return CUDA_ERROR_INVALID_DEVICE;
  strncpy(name, "XPU Fake GPU", static_cast<size_t>(len) - 1);
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  XPU_FAKE_COUNT_CALL();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= fk::GetConfig().devices || dev >= 64) return CUDA_ERROR_INVALID_DEVICE;
  g_contexts[dev].device = dev;
  *pctx = reinterpret_cast<CUcontext>(&g_contexts[dev]);
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  XPU_FAKE_COUNT_CALL();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The runtime makes the primary context current on first use; model that
  // as "always current" once a device is selected.
  int dev = fk::CurrentDevice();
  g_contexts[dev].device = dev;
  *pctx = reinterpret_cast<CUcontext>(&g_contexts[dev]);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  XPU_FAKE_COUNT_CALL();
  if (ctx == nullptr) return CUDA_SUCCESS;
  auto* c = reinterpret_cast<Context*>(ctx);
  if (c < g_contexts || c >= g_contexts + 64) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_set = true;
  return ToCu(fk::SetCurrentDevice(c->device));
}

CUresult cuCtxGetDevice(CUdevice* device) {
  XPU_FAKE_COUNT_CALL();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = fk::CurrentDevice();
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
  XPU_FAKE_COUNT_CALL();
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS:
      *pStr = "no error";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *pStr = "invalid argument";
      break;
    case CUDA_ERROR_INVALID_HANDLE:
      *pStr = "invalid resource handle";
      break;
    case CUDA_ERROR_NOT_READY:
      *pStr = "device not ready";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *pStr = "named symbol not found";
      break;
    default:
      *pStr = "unknown error";
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** pStr) {
  XPU_FAKE_COUNT_CALL();
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS:
      *pStr = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *pStr = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_INVALID_HANDLE:
      *pStr = "CUDA_ERROR_INVALID_HANDLE";
      break;
    case CUDA_ERROR_NOT_READY:
      *pStr = "CUDA_ERROR_NOT_READY";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *pStr = "CUDA_ERROR_NOT_FOUND";
      break;
    default:
      *pStr = "CUDA_ERROR_UNKNOWN";
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  XPU_FAKE_COUNT_CALL();
  return GetProcAddress(symbol, pfn, symbolStatus);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  XPU_FAKE_COUNT_CALL();
  return GetProcAddress(symbol, pfn, nullptr);
}

// --- Kernels -------------------------------------------------------------------

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) {
  XPU_FAKE_COUNT_CALL();
  return LaunchFn(f, kernelParams, hStream);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) {
  XPU_FAKE_COUNT_CALL();
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LaunchFn(f, kernelParams, config->hStream);
}

CUresult cuFuncGetName(const char** name, CUfunction hfunc) {
  XPU_FAKE_COUNT_CALL();
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hfunc == nullptr || !fk::IsFunction(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
  *name = fk::FunctionName(hfunc);
  return CUDA_SUCCESS;
}

// --- Streams and events ----------------------------------------------------------

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::CreateStream(Flags, 0, reinterpret_cast<void**>(phStream)));
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::DestroyStream(hStream));
}

CUresult cuStreamSynchronize(CUstream hStream) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::SynchronizeStream(fk::ResolveStream(hStream)));
}

CUresult cuStreamQuery(CUstream hStream) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::QueryStream(fk::ResolveStream(hStream)));
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::StreamWaitEvent(fk::ResolveStream(hStream), hEvent));
}

// A stream memory wait: the stream's worker polls the 32-bit word until the
// cyclic comparison CU_STREAM_WAIT_VALUE_GEQ holds (the only flag the hook
// uses; others are refused). The word lives in host memory here, as with
// mapped pinned memory on a GPU.
CUresult cuStreamWaitValue32_v2(CUstream hStream, CUdeviceptr addr, cuuint32_t value,
                                unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  if (flags != CU_STREAM_WAIT_VALUE_GEQ || addr == 0) return CUDA_ERROR_NOT_SUPPORTED;
  fk::Stream* s = fk::ResolveStream(hStream);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto* word = reinterpret_cast<uint32_t*>(static_cast<uintptr_t>(addr));
  return ToCu(fk::Enqueue(s, [word, value] {
    while (static_cast<int32_t>(__atomic_load_n(word, __ATOMIC_ACQUIRE) - value) < 0) {
      struct timespec ts = {0, 2000};
      nanosleep(&ts, nullptr);
    }
  }));
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(hStream);
  if (s == nullptr || captureStatus == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *captureStatus =
      fk::IsCapturing(s, nullptr) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  XPU_FAKE_COUNT_CALL();
  // CU_EVENT_DISABLE_TIMING == cudaEventDisableTiming == 2.
  return ToCu(fk::CreateEvent(Flags, reinterpret_cast<void**>(phEvent)));
}

CUresult cuEventDestroy_v2(CUevent hEvent) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::DestroyEvent(hEvent));
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::RecordEvent(hEvent, fk::ResolveStream(hStream)));
}

CUresult cuEventQuery(CUevent hEvent) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::QueryEvent(hEvent));
}
CUresult cuEventSynchronize(CUevent hEvent) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::SynchronizeEvent(hEvent));
}

CUresult cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::ElapsedMs(hStart, hEnd, pMilliseconds));
}

CUresult cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  XPU_FAKE_COUNT_CALL();
  return ToCu(fk::ElapsedMs(hStart, hEnd, pMilliseconds));
}

// Per-thread-default-stream variants share the implementation (fake_core.h).
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void** kernelParams, void** extra) {
  XPU_FAKE_COUNT_CALL();
  return LaunchFn(f, kernelParams, hStream);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) {
  XPU_FAKE_COUNT_CALL();
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LaunchFn(f, kernelParams, config->hStream);
}

// A CUkernel is the same handle as a CUfunction here (cudaGetKernel).
CUresult cuKernelGetName(const char** name, CUkernel hfunc) {
  XPU_FAKE_COUNT_CALL();
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (hfunc == nullptr || !fk::IsFunction(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
  *name = fk::FunctionName(hfunc);
  return CUDA_SUCCESS;
}

}  // extern "C"
