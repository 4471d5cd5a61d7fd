// tests/fake_runtime/fake_cudart_internal.h — helpers shared by the files of
// the fake libcudart (fake_cudart.cc, fake_cudart_variants.cc). They are
// internal functions, not exported CUDA symbols, so that one public entry
// point never calls another through the PLT (an interposer would see one call
// twice).
//
// Thread-safety: every function is safe to call from any thread; the last
// error is per thread, as in CUDA.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_CUDART_INTERNAL_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_CUDART_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace xpu::fake::cudart {

// Records a failure as the calling thread's last error; returns `e`.
cudaError_t Ret(cudaError_t e);
// Copies / sets on `stream` (host memory underneath); `sync` waits for it.
cudaError_t Memcpy(void* dst, const void* src, size_t n, cudaStream_t stream, bool sync);
cudaError_t Memset(void* dst, int value, size_t n, cudaStream_t stream, bool sync);
// Synchronous pitched copy on the legacy stream.
cudaError_t Memcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height);
// Enqueues the modelled kernel of host function `func`.
cudaError_t Launch(const void* func, void** args, cudaStream_t stream);
// Looks `symbol` up through the fake driver's cuGetProcAddress.
cudaError_t DriverEntryPoint(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                             unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult* driverStatus);

}  // namespace xpu::fake::cudart

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_CUDART_INTERNAL_H_
