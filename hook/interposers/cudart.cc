// hook/interposers/cudart.cc — interposers for the CUDA runtime
// (libcudart.so.13): kernel launches, graph launches, host-blocking
// synchronization and the synchronous memcpy kinds.
//
// Which entry points see launches in CUDA 13: nvcc-generated triple-chevron
// code calls __cudaLaunchKernel / __cudaLaunchKernel_ptsz with a
// cudaKernel_t handle (crt/host_runtime.h, unless __NV_LEGACY_LAUNCH), not
// cudaLaunchKernel; PyTorch and hand-written launchers call cudaLaunchKernel*
// with the host stub pointer. Both are interposed. Code built with
// --default-stream per-thread calls the _ptsz / _ptds variants; those are
// defined here under their exported names, which is why this file never lets
// the per-thread macros of cuda_runtime_api.h rename its definitions.
//
// Plain kernels are counted (XPU_CNT_LAUNCHES_UNTRACED) and traced only when
// XPU_KERNEL_SAMPLE_EVERY picks them; graph launches are always traced.
//
// Thread-safety: every interposer may run on any application thread; shared
// state is the lock-free KernelSigCache and function-local statics whose
// initialisation is thread-safe.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "hook/core_api.h"
#include "hook/interposers/launch_tracing.h"
#include "hook/interposers/signature_fields.h"

#if defined(__CUDART_API_PER_THREAD_DEFAULT_STREAM)
#error "cudart.cc must see the legacy-stream names to define both variants"
#endif

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

// Declared by cuda_runtime_api.h only under other macros, or only for nvcc
// (crt/device_functions.h); the exported names and signatures are fixed by
// libcudart.so.13.
extern "C" {
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shared_mem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t shared_mem, cudaStream_t stream);
cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                  size_t shared_mem, cudaStream_t stream);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                     void** args);
cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                             size_t shared_mem, cudaStream_t stream);
cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind);
cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                    size_t offset, cudaMemcpyKind kind);
cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count, size_t offset,
                                      cudaMemcpyKind kind);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** func_ptr,
                                         unsigned long long flags,
                                         cudaDriverEntryPointQueryResult* status);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** func_ptr,
                                                  unsigned int cuda_version,
                                                  unsigned long long flags,
                                                  cudaDriverEntryPointQueryResult* status);
}

namespace xpu::hook {

namespace {

// Returned when the real symbol cannot be resolved: the application sees the
// same error it would get from a runtime without the entry point.
constexpr cudaError_t kMissing = cudaErrorSymbolNotFound;

KernelSigCache& StubCache() {
  static KernelSigCache cache;  // zero-initialised, constant-initialised slots
  return cache;
}

// Host stub pointer (cudaLaunchKernel and friends) -> kernel name.
uint32_t NameStub(const void* func) {
  const char* name = nullptr;
  if (auto get_name = XPU_REAL_FN(kCudart, cudaFuncGetName)) {
    if (get_name(&name, func) != cudaSuccess) name = nullptr;
  }
  return InternKernel(name);
}

// cudaKernel_t (the triple-chevron path) -> kernel name. cudaKernel_t is the
// driver's CUkernel, so the driver names it; cudaFuncGetName accepts kernel
// handles as well on newer runtimes and is the fallback.
uint32_t NameKernelHandle(const void* kernel) {
  const char* name = nullptr;
  if (auto get_name = XPU_REAL_FN(kCuda, cuKernelGetName)) {
    if (get_name(&name, static_cast<CUkernel>(const_cast<void*>(kernel))) != CUDA_SUCCESS) {
      name = nullptr;
    }
  }
  if (name == nullptr) {
    if (auto get_name = XPU_REAL_FN(kCudart, cudaFuncGetName)) {
      if (get_name(&name, kernel) != cudaSuccess) name = nullptr;
    }
  }
  return InternKernel(name);
}

// Shared body of every plain-kernel launch interposer. `real` is already
// resolved and non-null; `call` invokes it.
template <typename NameFn, typename Call>
inline cudaError_t PlainLaunch(const ReentrancyGuard& g, const void* key, const void* stream,
                               NameFn name_fn, Call call) {
  if (!g.entered() || !Active() || !SamplePlainLaunch()) return call();
  EnsureStarted();
  const uint32_t sig = StubCache().Lookup(key, name_fn);
  if (sig == 0) return call();
  return TraceGpuCall(sig, stream, 0, XPU_REC_SAMPLED, call);
}

uint32_t StaticSig(std::atomic<uint32_t>* cached, uint16_t kind, const char* name) {
  uint32_t sig = cached->load(std::memory_order_relaxed);
  if (sig == 0) {
    sig = InternNamed(MakeSignature(kind), name);
    cached->store(sig, std::memory_order_relaxed);
  }
  return sig;
}

cudaError_t GraphLaunch(const ReentrancyGuard& g, decltype(&cudaGraphLaunch) real,
                        cudaGraphExec_t exec, cudaStream_t stream, const void* timing_stream) {
  if (!g.entered() || !Active()) return real(exec, stream);
  EnsureStarted();
  static std::atomic<uint32_t> sig_cache{0};
  const uint32_t sig = StaticSig(&sig_cache, XPU_OP_GRAPH_LAUNCH, "cudaGraphLaunch");
  if (sig == 0) return real(exec, stream);
  return TraceGpuCall(sig, timing_stream, 0, 0, [&] { return real(exec, stream); });
}

// Host-blocking call: one host interval [entry, return]. `value()` goes to
// the record's seq field; it is evaluated only when the call is traced.
// A successful stream or device synchronization also tells the core that
// this thread's earlier ops there are complete (NoteHostSync).
enum class SyncScope { kNone, kStream, kDevice };

template <typename Value, typename Call>
inline cudaError_t HostInterval(const ReentrancyGuard& g, std::atomic<uint32_t>* sig_cache,
                                uint16_t kind, const char* name, Value value_fn, Call call,
                                SyncScope scope = SyncScope::kNone,
                                const void* sync_stream = nullptr) {
  if (!g.entered() || !Active()) return call();
  EnsureStarted();
  const uint32_t value = value_fn();
  const uint32_t sig = StaticSig(sig_cache, kind, name);
  const uint64_t start = NowNs();
  const cudaError_t status = call();
  const uint64_t end = NowNs();
  if (status == cudaSuccess && scope != SyncScope::kNone) {
    NoteHostSync(sync_stream, scope == SyncScope::kDevice);
  }
  if (sig != 0) {
    EmitHostInterval(sig, start, end, value,
                     status == cudaSuccess ? 0 : static_cast<uint16_t>(XPU_REC_CALL_FAILED));
  }
  return status;
}

const char* MemcpyKindName(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToHost:
      return "HtoH";
    case cudaMemcpyHostToDevice:
      return "HtoD";
    case cudaMemcpyDeviceToHost:
      return "DtoH";
    case cudaMemcpyDeviceToDevice:
      return "DtoD";
    default:
      return "Default";
  }
}

// Synchronous copy: host interval with a signature per (API, direction,
// byte count); count = bytes (record.h XPU_OP_MEMCPY).
template <typename Call>
inline cudaError_t Memcpy(const ReentrancyGuard& g, const char* api, cudaMemcpyKind kind,
                          uint64_t bytes, Call call) {
  if (!g.entered() || !Active()) return call();
  EnsureStarted();
  xpu_signature_v1 sig = MakeSignature(XPU_OP_MEMCPY);
  sig.count = bytes;
  // "cudaMemcpyFromSymbol DtoH" fits the stack buffer; no allocation.
  char name[64];
  int len = std::snprintf(name, sizeof(name), "%s %s", api, MemcpyKindName(kind));
  if (len < 0) len = 0;
  if (len >= static_cast<int>(sizeof(name))) len = sizeof(name) - 1;
  const uint32_t sig_id = InternSignature(sig, name, static_cast<size_t>(len));
  const uint64_t start = NowNs();
  const cudaError_t status = call();
  const uint64_t end = NowNs();
  if (sig_id != 0) {
    const uint32_t value = bytes > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<uint32_t>(bytes);
    EmitHostInterval(sig_id, start, end, value,
                     status == cudaSuccess ? 0 : static_cast<uint16_t>(XPU_REC_CALL_FAILED));
  }
  return status;
}

}  // namespace
}  // namespace xpu::hook

using xpu::hook::ReentrancyGuard;

// ---- kernel launches -------------------------------------------------------

XPU_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                          size_t shared_mem, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, __cudaLaunchKernel);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(g, kernel, stream, xpu::hook::NameKernelHandle, [&] {
    return real(kernel, grid, block, args, shared_mem, stream);
  });
}

XPU_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                               void** args, size_t shared_mem,
                                               cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, __cudaLaunchKernel_ptsz);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(
      g, kernel, xpu::hook::PtszStream(stream), xpu::hook::NameKernelHandle,
      [&] { return real(kernel, grid, block, args, shared_mem, stream); });
}

XPU_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                        size_t shared_mem, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchKernel);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(g, func, stream, xpu::hook::NameStub,
                                [&] { return real(func, grid, block, args, shared_mem, stream); });
}

XPU_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                             size_t shared_mem, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchKernel_ptsz);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(g, func, xpu::hook::PtszStream(stream), xpu::hook::NameStub,
                                [&] { return real(func, grid, block, args, shared_mem, stream); });
}

XPU_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                           void** args) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchKernelExC);
  if (!real) return xpu::hook::kMissing;
  const void* stream = config ? config->stream : nullptr;
  return xpu::hook::PlainLaunch(g, func, stream, xpu::hook::NameStub,
                                [&] { return real(config, func, args); });
}

XPU_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                                void** args) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchKernelExC_ptsz);
  if (!real) return xpu::hook::kMissing;
  const void* stream = xpu::hook::PtszStream(config ? config->stream : nullptr);
  return xpu::hook::PlainLaunch(g, func, stream, xpu::hook::NameStub,
                                [&] { return real(config, func, args); });
}

XPU_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block,
                                                   void** args, size_t shared_mem,
                                                   cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchCooperativeKernel);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(g, func, stream, xpu::hook::NameStub,
                                [&] { return real(func, grid, block, args, shared_mem, stream); });
}

XPU_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 grid, dim3 block,
                                                        void** args, size_t shared_mem,
                                                        cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaLaunchCooperativeKernel_ptsz);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::PlainLaunch(g, func, xpu::hook::PtszStream(stream), xpu::hook::NameStub,
                                [&] { return real(func, grid, block, args, shared_mem, stream); });
}

XPU_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaGraphLaunch);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::GraphLaunch(g, real, exec, stream, stream);
}

XPU_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaGraphLaunch_ptsz);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::GraphLaunch(g, real, exec, stream, xpu::hook::PtszStream(stream));
}

// ---- host-blocking synchronization ----------------------------------------

XPU_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaStreamSynchronize);
  if (!real) return xpu::hook::kMissing;
  static std::atomic<uint32_t> sig{0};
  return xpu::hook::HostInterval(
      g, &sig, XPU_OP_SYNC_STREAM, "cudaStreamSynchronize",
      [&]() -> uint32_t { return xpu::hook::StreamIndex(stream); }, [&] { return real(stream); },
      xpu::hook::SyncScope::kStream, stream);
}

XPU_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaStreamSynchronize_ptsz);
  if (!real) return xpu::hook::kMissing;
  static std::atomic<uint32_t> sig{0};
  return xpu::hook::HostInterval(
      g, &sig, XPU_OP_SYNC_STREAM, "cudaStreamSynchronize",
      [&]() -> uint32_t { return xpu::hook::StreamIndex(xpu::hook::PtszStream(stream)); },
      [&] { return real(stream); }, xpu::hook::SyncScope::kStream, xpu::hook::PtszStream(stream));
}

XPU_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaDeviceSynchronize);
  if (!real) return xpu::hook::kMissing;
  static std::atomic<uint32_t> sig{0};
  return xpu::hook::HostInterval(
      g, &sig, XPU_OP_SYNC_DEVICE, "cudaDeviceSynchronize", [] { return 0u; },
      [&] { return real(); }, xpu::hook::SyncScope::kDevice);
}

XPU_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaEventSynchronize);
  if (!real) return xpu::hook::kMissing;
  static std::atomic<uint32_t> sig{0};
  return xpu::hook::HostInterval(
      g, &sig, XPU_OP_SYNC_EVENT, "cudaEventSynchronize", [] { return 0u; },
      [&] { return real(event); });
}

// ---- stream capture ----------------------------------------------------------
// Counted so that the launch path checks capture status only while some
// capture is active (NoteCapture). Captures begun through the driver API are
// not counted: launches into them are still never given events, since every
// event record checks capture first.

XPU_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  auto real = XPU_REAL_FN(kCudart, cudaStreamBeginCapture);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(stream, mode);
  if (rc == cudaSuccess) xpu::hook::NoteCapture(1);
  return rc;
}

XPU_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                   cudaStreamCaptureMode mode) {
  auto real = XPU_REAL_FN(kCudart, cudaStreamBeginCapture_ptsz);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(stream, mode);
  if (rc == cudaSuccess) xpu::hook::NoteCapture(1);
  return rc;
}

XPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                     const cudaGraphNode_t* deps,
                                                     const cudaGraphEdgeData* edges,
                                                     size_t n, cudaStreamCaptureMode mode) {
  auto real = XPU_REAL_FN(kCudart, cudaStreamBeginCaptureToGraph);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(stream, graph, deps, edges, n, mode);
  if (rc == cudaSuccess) xpu::hook::NoteCapture(1);
  return rc;
}

XPU_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto real = XPU_REAL_FN(kCudart, cudaStreamEndCapture);
  if (!real) return xpu::hook::kMissing;
  // Whatever the result, the stream is no longer capturing afterwards.
  const cudaError_t rc = real(stream, graph);
  xpu::hook::NoteCapture(-1);
  return rc;
}

XPU_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t* graph) {
  auto real = XPU_REAL_FN(kCudart, cudaStreamEndCapture_ptsz);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(stream, graph);
  xpu::hook::NoteCapture(-1);
  return rc;
}

// ---- synchronous copies ----------------------------------------------------

XPU_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpy);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpy", kind, count,
                           [&] { return real(dst, src, count, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count,
                                       cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpy_ptds);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpy", kind, count,
                           [&] { return real(dst, src, count, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                                    size_t width, size_t height, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpy2D);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpy2D", kind, static_cast<uint64_t>(width) * height,
                           [&] { return real(dst, dpitch, src, spitch, width, height, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                                         size_t width, size_t height, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpy2D_ptds);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpy2D", kind, static_cast<uint64_t>(width) * height,
                           [&] { return real(dst, dpitch, src, spitch, width, height, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count,
                                          size_t offset, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpyToSymbol);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpyToSymbol", kind, count,
                           [&] { return real(symbol, src, count, offset, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                               size_t offset, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpyToSymbol_ptds);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpyToSymbol", kind, count,
                           [&] { return real(symbol, src, count, offset, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count,
                                            size_t offset, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpyFromSymbol);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpyFromSymbol", kind, count,
                           [&] { return real(dst, symbol, count, offset, kind); });
}

XPU_EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count,
                                                 size_t offset, cudaMemcpyKind kind) {
  ReentrancyGuard g;
  auto real = XPU_REAL_FN(kCudart, cudaMemcpyFromSymbol_ptds);
  if (!real) return xpu::hook::kMissing;
  return xpu::hook::Memcpy(g, "cudaMemcpyFromSymbol", kind, count,
                           [&] { return real(dst, symbol, count, offset, kind); });
}

// ---- driver entry points obtained through the runtime ---------------------
// cudart resolves these inside the driver through its private
// cuGetProcAddress pointer, which never reaches the driver.cc
// interposer; substituting here lets launches made through such pointers
// (e.g. a launcher that uses cudaGetDriverEntryPointByVersion) be seen too.
// cudaEnablePerThreadDefaultStream selects the _ptsz flavour.

namespace {
void SubstituteEntry(cudaError_t status, const char* symbol, void** func_ptr,
                     unsigned long long flags) {
  if (status != cudaSuccess || symbol == nullptr || func_ptr == nullptr || *func_ptr == nullptr)
    return;
  *func_ptr = xpu::hook::SubstituteDriverEntryPoint(
      symbol, *func_ptr, (flags & cudaEnablePerThreadDefaultStream) != 0);
}
}  // namespace

// Deprecated in CUDA 13 but still exported and still called by older
// binaries, so it stays interposed.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
XPU_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** func_ptr,
                                               unsigned long long flags,
                                               cudaDriverEntryPointQueryResult* status) {
  auto real = XPU_REAL_FN(kCudart, cudaGetDriverEntryPoint);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(symbol, func_ptr, flags, status);
  SubstituteEntry(rc, symbol, func_ptr, flags);
  return rc;
}
#pragma GCC diagnostic pop

XPU_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** func_ptr,
                                                    unsigned long long flags,
                                                    cudaDriverEntryPointQueryResult* status) {
  auto real = XPU_REAL_FN(kCudart, cudaGetDriverEntryPoint_ptsz);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(symbol, func_ptr, flags, status);
  // The _ptsz variant defaults to per-thread when no stream flavour is given.
  const unsigned long long mask = cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream;
  SubstituteEntry(rc, symbol, func_ptr,
                  (flags & mask) ? flags : (flags | cudaEnablePerThreadDefaultStream));
  return rc;
}

XPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** func_ptr,
                                                        unsigned int cuda_version,
                                                        unsigned long long flags,
                                                        cudaDriverEntryPointQueryResult* status) {
  auto real = XPU_REAL_FN(kCudart, cudaGetDriverEntryPointByVersion);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(symbol, func_ptr, cuda_version, flags, status);
  SubstituteEntry(rc, symbol, func_ptr, flags);
  return rc;
}

XPU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** func_ptr, unsigned int cuda_version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  auto real = XPU_REAL_FN(kCudart, cudaGetDriverEntryPointByVersion_ptsz);
  if (!real) return xpu::hook::kMissing;
  const cudaError_t rc = real(symbol, func_ptr, cuda_version, flags, status);
  const unsigned long long mask = cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream;
  SubstituteEntry(rc, symbol, func_ptr,
                  (flags & mask) ? flags : (flags | cudaEnablePerThreadDefaultStream));
  return rc;
}
