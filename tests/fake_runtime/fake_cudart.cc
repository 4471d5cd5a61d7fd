// tests/fake_runtime/fake_cudart.cc — test double of libcudart.so.13.
//
// Implements the CUDA runtime C API subset that the hook intercepts or calls
// and that the test programs use, on top of fake_core (streams = worker
// threads, kernels = timed sleeps, events = timestamps; see fake_core.h).
// Definitions sit inside extern "C" after the real cuda_runtime_api.h, so a
// signature that differs from the real declaration fails to compile. The
// launch-stub and per-thread-stream entry points are in
// fake_cudart_variants.cc.
// Anything not implemented here is absent (the dynamic linker reports it);
// implemented calls never crash on bad handles: they return an error code.
//
// Thread-safety: every function is safe to call from any thread; the last
// error is per thread, as in CUDA.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>

#include "fake_core.h"
#include "fake_cudart_internal.h"

namespace fk = xpu::fake;

namespace {
thread_local cudaError_t t_last_error = cudaSuccess;
}  // namespace

namespace xpu::fake::cudart {

// Records a failure as the thread's last error (cudaErrorNotReady is a
// status, not an error, as in CUDA).
cudaError_t Ret(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) t_last_error = e;
  return e;
}

}  // namespace xpu::fake::cudart

namespace {

using xpu::fake::cudart::Ret;

constexpr size_t kFakeMemBytes = 80ull << 30;  // reported total memory

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorIllegalState, "cudaErrorIllegalState",
     "the operation is not permitted in the current state"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

}  // namespace

namespace xpu::fake::cudart {

cudaError_t Memcpy(void* dst, const void* src, size_t n, cudaStream_t stream, bool sync) {
  if (n != 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  cudaError_t e = fk::Enqueue(s, [dst, src, n] { memmove(dst, src, n); });
  if (e == cudaSuccess && sync) e = fk::SynchronizeStream(s);
  return e;
}

cudaError_t Memset(void* dst, int value, size_t n, cudaStream_t stream, bool sync) {
  if (n != 0 && dst == nullptr) return cudaErrorInvalidValue;
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  cudaError_t e = fk::Enqueue(s, [dst, value, n] { memset(dst, value, n); });
  if (e == cudaSuccess && sync) e = fk::SynchronizeStream(s);
  return e;
}

cudaError_t Memcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height) {
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (height != 0 && width != 0 && (dst == nullptr || src == nullptr)) {
    return cudaErrorInvalidValue;
  }
  fk::Stream* s = fk::ResolveStream(nullptr);
  cudaError_t e = fk::Enqueue(s, [=] {
    for (size_t row = 0; row < height; ++row) {
      memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
              width);
    }
  });
  return e == cudaSuccess ? fk::SynchronizeStream(s) : e;
}

cudaError_t Launch(const void* func, void** args, cudaStream_t stream) {
  if (func == nullptr) return cudaErrorInvalidDeviceFunction;
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  return fk::EnqueueKernel(s, fk::KernelDurationNs(func, args),
                           fk::FunctionName(fk::FunctionForHostFn(func)));
}

// Driver entry points come from the (fake) driver's cuGetProcAddress, as the
// real runtime does.
cudaError_t DriverEntryPoint(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                             unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr) return Ret(cudaErrorInvalidValue);
  *funcPtr = nullptr;
  void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  using GetProc = int (*)(const char*, void**, int, unsigned long long, int*);
  auto get = drv ? reinterpret_cast<GetProc>(dlsym(drv, "cuGetProcAddress_v2")) : nullptr;
  int status = 0;
  int rc = get ? get(symbol, funcPtr, static_cast<int>(cudaVersion), flags, &status) : 1;
  bool found = rc == 0 && *funcPtr != nullptr;
  if (driverStatus) {
    *driverStatus = found ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  }
  return found ? cudaSuccess : Ret(cudaErrorSymbolNotFound);
}

}  // namespace xpu::fake::cudart

using xpu::fake::cudart::DriverEntryPoint;
using xpu::fake::cudart::Launch;
using xpu::fake::cudart::Memcpy;
using xpu::fake::cudart::Memcpy2D;
using xpu::fake::cudart::Memset;
using xpu::fake::cudart::Ret;

extern "C" {

// --- Devices, versions, errors ---------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  XPU_FAKE_COUNT_CALL();
  if (count == nullptr) return Ret(cudaErrorInvalidValue);
  *count = fk::GetConfig().devices;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::SetCurrentDevice(device));
}

cudaError_t cudaGetDevice(int* device) {
  XPU_FAKE_COUNT_CALL();
  if (device == nullptr) return Ret(cudaErrorInvalidValue);
  *device = fk::CurrentDevice();
  return cudaSuccess;
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  XPU_FAKE_COUNT_CALL();
  if (prop == nullptr) return Ret(cudaErrorInvalidValue);
  if (device < 0 || device >= fk::GetConfig().devices) return Ret(cudaErrorInvalidDevice);
  memset(prop, 0, sizeof(*prop));
  strncpy(prop->name, "XPU Fake GPU", sizeof(prop->name) - 1);
  prop->totalGlobalMem = kFakeMemBytes;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  // A process models its own GPU(s): the node's GPU index is LOCAL_RANK
  // times the device count plus the device, as if each local rank had been
  // given its own GPUs. The UUID is stable per host and index, so that two
  // ranks never share one (the dashboards join on it).
  const fk::Config& c = fk::GetConfig();
  const int physical = (c.local_rank >= 0 ? c.local_rank : 0) * c.devices + device;
  prop->pciDomainID = 0;
  prop->pciBusID = physical;
  prop->pciDeviceID = 0;
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  uint32_t h = 2166136261u;  // FNV-1a of the host name
  for (const char* p = host; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  const unsigned char uuid[16] = {'X', 'P', 'U', 'F',
                                  static_cast<unsigned char>(h >> 24),
                                  static_cast<unsigned char>(h >> 16),
                                  static_cast<unsigned char>(h >> 8),
                                  static_cast<unsigned char>(h), 0, 0, 0, 0, 0, 0,
                                  static_cast<unsigned char>(physical >> 8),
                                  static_cast<unsigned char>(physical)};
  memcpy(prop->uuid.bytes, uuid, sizeof(uuid));
  prop->l2CacheSize = 50 << 20;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  XPU_FAKE_COUNT_CALL();
  if (value == nullptr) return Ret(cudaErrorInvalidValue);
  if (device < 0 || device >= fk::GetConfig().devices) return Ret(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = 132;
      break;
    case cudaDevAttrWarpSize:
      *value = 32;
      break;
    case cudaDevAttrPciBusId:
      *value = device;
      break;
    default:
      *value = 0;
      break;
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::SynchronizeDevice());
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  XPU_FAKE_COUNT_CALL();
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  XPU_FAKE_COUNT_CALL();
  if (v == nullptr) return Ret(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  XPU_FAKE_COUNT_CALL();
  if (v == nullptr) return Ret(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  XPU_FAKE_COUNT_CALL();
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  XPU_FAKE_COUNT_CALL();
  return t_last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  XPU_FAKE_COUNT_CALL();
  for (const ErrorText& e : kErrors) {
    if (e.code == error) return e.name;
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  XPU_FAKE_COUNT_CALL();
  for (const ErrorText& e : kErrors) {
    if (e.code == error) return e.text;
  }
  return "unrecognized error code";
}

// --- Memory ------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, size_t size) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::Malloc(p, size));
}

cudaError_t cudaFree(void* p) {
  XPU_FAKE_COUNT_CALL();
  // cudaFree synchronises the device: queued async copies may still use p.
  if (p != nullptr) fk::SynchronizeDevice();
  return Ret(fk::Free(p));
}

cudaError_t cudaMallocHost(void** p, size_t size) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::Malloc(p, size));
}
cudaError_t cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::Malloc(p, size));
}
// Host memory is device memory in this runtime: the mapped pointer is the
// host pointer.
cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  if (dev == nullptr || host == nullptr || flags != 0) return Ret(cudaErrorInvalidValue);
  *dev = host;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::Free(p));
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  XPU_FAKE_COUNT_CALL();
  if (free_bytes) *free_bytes = kFakeMemBytes;
  if (total) *total = kFakeMemBytes;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memcpy(dst, src, count, nullptr, true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memcpy(dst, src, count, stream, false));
}

cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memset(dev_ptr, value, count, nullptr, true));
}

cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memset(dev_ptr, value, count, stream, false));
}

// --- Streams -----------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::CreateStream(0, 0, reinterpret_cast<void**>(s)));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::CreateStream(flags, 0, reinterpret_cast<void**>(s)));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::CreateStream(flags, priority, reinterpret_cast<void**>(s)));
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::DestroyStream(s));
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::SynchronizeStream(fk::ResolveStream(s)));
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::QueryStream(fk::ResolveStream(s)));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::StreamWaitEvent(fk::ResolveStream(s), event));
}

cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int* flags) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(h);
  if (s == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  fk::StreamFlags(s, flags, nullptr);
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t h, int* priority) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(h);
  if (s == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  fk::StreamFlags(s, nullptr, priority);
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t h, int* device) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(h);
  if (s == nullptr || device == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  *device = fk::StreamDevice(s);
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  XPU_FAKE_COUNT_CALL();
  if (fn == nullptr) return Ret(cudaErrorInvalidValue);
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  return Ret(fk::Enqueue(s, [fn, user_data] { fn(user_data); }));
}

// --- Capture and graphs --------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::BeginCapture(fk::ResolveStream(stream)));
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::EndCapture(fk::ResolveStream(stream), reinterpret_cast<void**>(graph)));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr || status == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  *status =
      fk::IsCapturing(s, nullptr) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                     enum cudaStreamCaptureStatus* captureStatus_out,
                                     unsigned long long* id_out, cudaGraph_t* graph_out,
                                     const cudaGraphNode_t** dependencies_out,
                                     const cudaGraphEdgeData** edgeData_out,
                                     size_t* numDependencies_out) {
  XPU_FAKE_COUNT_CALL();
  fk::Stream* s = fk::ResolveStream(stream);
  if (s == nullptr || captureStatus_out == nullptr) return Ret(cudaErrorInvalidResourceHandle);
  unsigned long long id = 0;
  *captureStatus_out =
      fk::IsCapturing(s, &id) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  if (id_out) *id_out = id;
  if (graph_out) *graph_out = nullptr;  // the graph under capture is not exposed
  if (dependencies_out) *dependencies_out = nullptr;
  if (edgeData_out) *edgeData_out = nullptr;
  if (numDependencies_out) *numDependencies_out = 0;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* mode) {
  XPU_FAKE_COUNT_CALL();
  return mode ? cudaSuccess : Ret(cudaErrorInvalidValue);
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::InstantiateGraph(graph, reinterpret_cast<void**>(exec)));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::InstantiateGraph(graph, reinterpret_cast<void**>(exec)));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::LaunchGraph(exec, fk::ResolveStream(stream)));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::DestroyGraph(graph));
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::DestroyGraphExec(exec));
}

// --- Events --------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::CreateEvent(0, reinterpret_cast<void**>(event)));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::CreateEvent(flags, reinterpret_cast<void**>(event)));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::RecordEvent(event, fk::ResolveStream(stream)));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::RecordEvent(event, fk::ResolveStream(stream)));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::QueryEvent(event));
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::SynchronizeEvent(event));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::ElapsedMs(start, end, ms));
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::DestroyEvent(event));
}

// --- Kernels -------------------------------------------------------------------

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                             size_t sharedMem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Launch(func, args, stream));
}

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                        size_t sharedMem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Launch(func, args, stream));
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** args) {
  XPU_FAKE_COUNT_CALL();
  if (config == nullptr) return Ret(cudaErrorInvalidValue);
  return Ret(Launch(func, args, config->stream));
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  XPU_FAKE_COUNT_CALL();
  if (name == nullptr || func == nullptr) return Ret(cudaErrorInvalidValue);
  *name = fk::FunctionName(fk::FunctionForHostFn(func));
  return cudaSuccess;
}

cudaError_t cudaGetFuncBySymbol(cudaFunction_t* function, const void* symbol) {
  XPU_FAKE_COUNT_CALL();
  if (function == nullptr || symbol == nullptr) return Ret(cudaErrorInvalidDeviceFunction);
  *function = static_cast<cudaFunction_t>(fk::FunctionForHostFn(symbol));
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
                                             unsigned int cudaVersion, unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult* driverStatus) {
  XPU_FAKE_COUNT_CALL();
  return DriverEntryPoint(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult* driverStatus) {
  XPU_FAKE_COUNT_CALL();
  return DriverEntryPoint(symbol, funcPtr, 13000, flags, driverStatus);
}

}  // extern "C"
