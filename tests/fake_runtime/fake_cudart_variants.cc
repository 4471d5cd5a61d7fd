// tests/fake_runtime/fake_cudart_variants.cc — the fake libcudart's
// launch-stub entry point (__cudaLaunchKernel, called by CUDA 13
// nvcc-generated host stubs with a cudaKernel_t from cudaGetKernel) and the
// _ptsz/_ptds entry points that code built with --default-stream per-thread
// calls. The double maps the per-thread default stream to the legacy stream
// (fake_core.h), so they share the plain implementations. The _ptsz/_ptds
// symbols are not declared by the headers in this build mode; their
// signatures follow the plain functions.
//
// Thread-safety: every function is safe to call from any thread.
#include <cuda_runtime_api.h>

#include "fake_core.h"
#include "fake_cudart_internal.h"

namespace fk = xpu::fake;

using xpu::fake::cudart::DriverEntryPoint;
using xpu::fake::cudart::Launch;
using xpu::fake::cudart::Memcpy;
using xpu::fake::cudart::Memcpy2D;
using xpu::fake::cudart::Ret;

extern "C" {

cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr) {
  XPU_FAKE_COUNT_CALL();
  if (kernelPtr == nullptr || entryFuncAddr == nullptr) return Ret(cudaErrorInvalidDeviceFunction);
  *kernelPtr = static_cast<cudaKernel_t>(fk::FunctionForHostFn(entryFuncAddr));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                               size_t shmem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (kernel == nullptr || !fk::IsFunction(kernel)) return Ret(cudaErrorInvalidDeviceFunction);
  return Ret(Launch(fk::FunctionHostFn(kernel), args, stream));
}

cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                    size_t shmem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  if (kernel == nullptr || !fk::IsFunction(kernel)) return Ret(cudaErrorInvalidDeviceFunction);
  return Ret(Launch(fk::FunctionHostFn(kernel), args, stream));
}

cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim, void** args,
                                  size_t sharedMem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Launch(func, args, stream));
}

cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 gridDim, dim3 blockDim,
                                             void** args, size_t sharedMem, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Launch(func, args, stream));
}

cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func,
                                     void** args) {
  XPU_FAKE_COUNT_CALL();
  if (config == nullptr) return Ret(cudaErrorInvalidValue);
  return Ret(Launch(func, args, config->stream));
}

cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::SynchronizeStream(fk::ResolveStream(s)));
}

cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t stream) {
  XPU_FAKE_COUNT_CALL();
  return Ret(fk::LaunchGraph(exec, fk::ResolveStream(stream)));
}

cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memcpy(dst, src, count, nullptr, true));
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memcpy2D(dst, dpitch, src, spitch, width, height));
}

cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  return Ret(Memcpy2D(dst, dpitch, src, spitch, width, height));
}

// A "symbol" is its host shadow variable here: copies go to/from its bytes.
cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  if (symbol == nullptr) return Ret(cudaErrorInvalidSymbol);
  return Ret(
      Memcpy(static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count, nullptr, true));
}

cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                    size_t offset, enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  if (symbol == nullptr) return Ret(cudaErrorInvalidSymbol);
  return Ret(
      Memcpy(static_cast<char*>(const_cast<void*>(symbol)) + offset, src, count, nullptr, true));
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                 enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  if (symbol == nullptr) return Ret(cudaErrorInvalidSymbol);
  return Ret(Memcpy(dst, static_cast<const char*>(symbol) + offset, count, nullptr, true));
}

cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind) {
  XPU_FAKE_COUNT_CALL();
  if (symbol == nullptr) return Ret(cudaErrorInvalidSymbol);
  return Ret(Memcpy(dst, static_cast<const char*>(symbol) + offset, count, nullptr, true));
}

cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult* driverStatus) {
  XPU_FAKE_COUNT_CALL();
  return DriverEntryPoint(symbol, funcPtr, 13000, flags, driverStatus);
}

cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult* driverStatus) {
  XPU_FAKE_COUNT_CALL();
  return DriverEntryPoint(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

}  // extern "C"
