// hook/interposers/driver.cc — interposers for the CUDA driver API
// (libcuda.so.1): cuLaunchKernel, cuLaunchKernelEx (+_ptsz) and the entry-point
// query cuGetProcAddress (+_v2).
//
// Why cuGetProcAddress is hooked (findings for CUDA 12/13):
//  * libcudart.so.13 never calls the driver through the dynamic linker: it
//    dlopen()s libcuda.so.1 and dlsym()s cuGetProcAddress_v2 on that handle
//    (its dynamic table imports dlopen/dlsym/dlvsym and its strings hold
//    "cuGetProcAddress_v2", "cuLaunchKernel_ptsz", ...), then fetches every
//    driver entry point through it. A handle-scoped dlsym ignores
//    LD_PRELOAD, so runtime launches never reach the interposers below; they
//    are seen in cudart.cc instead, and no launch is counted twice.
//  * Code that links libcuda directly and calls cuLaunchKernel* (Triton's
//    generated launcher, custom C++ ops) binds to the exported symbols below.
//  * Code that asks for the entry point at run time (cuda-python's bindings,
//    launchers that cache a cuGetProcAddress result) would bypass the
//    symbols: the cuGetProcAddress interposer hands out our wrappers for the
//    launch entry points and passes every other symbol through unchanged.
//    The same substitution is applied to cudaGetDriverEntryPoint* in
//    cudart.cc, because cudart answers those through its private
//    pointer, not through this interposer.
//  * Not visible to any interposer: a launcher that does
//    dlsym(dlopen("libcuda.so.1"), "cuLaunchKernel") itself. Catching that
//    needs a dlsym interposer (out of scope here).
// Launches made while another traced call runs on this thread (cuBLAS or
// NCCL launching through the driver) pass straight through: the outer
// interposer holds the reentrancy guard, so they are not counted twice.
//
// Thread-safety: every interposer may run on any thread. The substituted
// entry points live in four atomic slots written once (compare-and-swap) and
// read with acquire loads.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "hook/core_api.h"
#include "hook/interposers/launch_tracing.h"
#include "hook/interposers/signature_fields.h"

#if defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "driver.cc must see the legacy-stream names to define both variants"
#endif

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the unversioned
// symbol is the CUDA 11.3 signature without the status argument.
#undef cuGetProcAddress

#define XPU_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared_mem, CUstream stream, void** params, void** extra);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra);
}

namespace xpu::hook {
namespace {

using LaunchKernelFn = decltype(&cuLaunchKernel);
using LaunchKernelExFn = decltype(&cuLaunchKernelEx);

// Returned when the real symbol cannot be resolved.
constexpr CUresult kMissing = CUDA_ERROR_NOT_FOUND;

KernelSigCache& FunctionCache() {
  static KernelSigCache cache;
  return cache;
}

uint32_t NameFunction(const void* f) {
  const char* name = nullptr;
  if (auto get_name = XPU_REAL_FN(kCuda, cuFuncGetName)) {
    if (get_name(&name, static_cast<CUfunction>(const_cast<void*>(f))) != CUDA_SUCCESS) {
      name = nullptr;
    }
  }
  return InternKernel(name);
}

template <typename Call>
inline CUresult DriverLaunch(CUfunction f, const void* stream, Call call) {
  ReentrancyGuard g;
  if (!g.entered() || !Active() || !SamplePlainLaunch()) return call();
  EnsureStarted();
  const uint32_t sig = FunctionCache().Lookup(f, NameFunction);
  if (sig == 0) return call();
  return TraceGpuCall(sig, stream, 0, XPU_REC_SAMPLED, call);
}

inline CUresult LaunchKernelVia(LaunchKernelFn real, bool ptsz, CUfunction f, unsigned int gx,
                                unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                                unsigned int bz, unsigned int shared_mem, CUstream stream,
                                void** params, void** extra) {
  if (!real) return kMissing;
  const void* timing_stream = ptsz ? PtszStream(stream) : stream;
  return DriverLaunch(f, timing_stream, [&] {
    return real(f, gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra);
  });
}

inline CUresult LaunchKernelExVia(LaunchKernelExFn real, bool ptsz, const CUlaunchConfig* config,
                                  CUfunction f, void** params, void** extra) {
  if (!real) return kMissing;
  const void* stream = config ? config->hStream : nullptr;
  const void* timing_stream = ptsz ? PtszStream(stream) : stream;
  return DriverLaunch(f, timing_stream, [&] { return real(config, f, params, extra); });
}

// Real functions behind the wrappers handed out by the entry-point queries,
// one per (entry point, stream flavour). Written once; a query that returns
// a different pointer for an occupied slot is passed through unwrapped.
std::atomic<void*> g_gpa_launch{nullptr};
std::atomic<void*> g_gpa_launch_ptsz{nullptr};
std::atomic<void*> g_gpa_launch_ex{nullptr};
std::atomic<void*> g_gpa_launch_ex_ptsz{nullptr};

CUresult GpaLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                         unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared_mem,
                         CUstream stream, void** params, void** extra) {
  return LaunchKernelVia(
      reinterpret_cast<LaunchKernelFn>(g_gpa_launch.load(std::memory_order_acquire)), false, f, gx,
      gy, gz, bx, by, bz, shared_mem, stream, params, extra);
}
CUresult GpaLaunchKernelPtsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int shared_mem, CUstream stream, void** params,
                             void** extra) {
  return LaunchKernelVia(
      reinterpret_cast<LaunchKernelFn>(g_gpa_launch_ptsz.load(std::memory_order_acquire)), true, f,
      gx, gy, gz, bx, by, bz, shared_mem, stream, params, extra);
}
CUresult GpaLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                           void** extra) {
  return LaunchKernelExVia(
      reinterpret_cast<LaunchKernelExFn>(g_gpa_launch_ex.load(std::memory_order_acquire)), false,
      config, f, params, extra);
}
CUresult GpaLaunchKernelExPtsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return LaunchKernelExVia(
      reinterpret_cast<LaunchKernelExFn>(g_gpa_launch_ex_ptsz.load(std::memory_order_acquire)),
      true, config, f, params, extra);
}

void* Claim(std::atomic<void*>* slot, void* real_fn, void* wrapper) {
  void* expected = nullptr;
  if (slot->compare_exchange_strong(expected, real_fn, std::memory_order_acq_rel) ||
      expected == real_fn) {
    return wrapper;
  }
  // A second, different implementation for the same slot (another version
  // of the entry point): forward it unwrapped rather than mix them up.
  Count(XPU_CNT_INTERNAL);
  return real_fn;
}

}  // namespace

void* SubstituteDriverEntryPoint(const char* symbol, void* real_fn, bool per_thread) {
  if (symbol == nullptr || real_fn == nullptr) return real_fn;
  // Never wrap our own wrappers (a query answered by a wrapped table).
  if (real_fn == reinterpret_cast<void*>(&GpaLaunchKernel) ||
      real_fn == reinterpret_cast<void*>(&GpaLaunchKernelPtsz) ||
      real_fn == reinterpret_cast<void*>(&GpaLaunchKernelEx) ||
      real_fn == reinterpret_cast<void*>(&GpaLaunchKernelExPtsz)) {
    return real_fn;
  }
  if (std::strcmp(symbol, "cuLaunchKernel") == 0) {
    return per_thread
               ? Claim(&g_gpa_launch_ptsz, real_fn, reinterpret_cast<void*>(&GpaLaunchKernelPtsz))
               : Claim(&g_gpa_launch, real_fn, reinterpret_cast<void*>(&GpaLaunchKernel));
  }
  if (std::strcmp(symbol, "cuLaunchKernelEx") == 0) {
    return per_thread
               ? Claim(&g_gpa_launch_ex_ptsz, real_fn,
                       reinterpret_cast<void*>(&GpaLaunchKernelExPtsz))
               : Claim(&g_gpa_launch_ex, real_fn, reinterpret_cast<void*>(&GpaLaunchKernelEx));
  }
  return real_fn;
}

}  // namespace xpu::hook

// ---- launches --------------------------------------------------------------

XPU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared_mem, CUstream stream, void** params,
                                   void** extra) {
  return xpu::hook::LaunchKernelVia(XPU_REAL_FN(kCuda, cuLaunchKernel), false, f, gx, gy, gz, bx,
                                    by, bz, shared_mem, stream, params, extra);
}

XPU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared_mem, CUstream stream,
                                        void** params, void** extra) {
  return xpu::hook::LaunchKernelVia(XPU_REAL_FN(kCuda, cuLaunchKernel_ptsz), true, f, gx, gy, gz,
                                    bx, by, bz, shared_mem, stream, params, extra);
}

XPU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                     void** extra) {
  return xpu::hook::LaunchKernelExVia(XPU_REAL_FN(kCuda, cuLaunchKernelEx), false, config, f,
                                      params, extra);
}

XPU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) {
  return xpu::hook::LaunchKernelExVia(XPU_REAL_FN(kCuda, cuLaunchKernelEx_ptsz), true, config, f,
                                      params, extra);
}

// ---- entry-point queries ---------------------------------------------------

XPU_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  auto real = XPU_REAL_FN(kCuda, cuGetProcAddress_v2);
  if (!real) return xpu::hook::kMissing;
  const CUresult rc = real(symbol, pfn, cuda_version, flags, status);
  if (rc == CUDA_SUCCESS && pfn != nullptr) {
    *pfn = xpu::hook::SubstituteDriverEntryPoint(
        symbol, *pfn, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
  }
  return rc;
}

XPU_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                     cuuint64_t flags) {
  auto real = XPU_REAL_FN(kCuda, cuGetProcAddress);
  if (!real) return xpu::hook::kMissing;
  const CUresult rc = real(symbol, pfn, cuda_version, flags);
  if (rc == CUDA_SUCCESS && pfn != nullptr) {
    *pfn = xpu::hook::SubstituteDriverEntryPoint(
        symbol, *pfn, (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
  }
  return rc;
}
