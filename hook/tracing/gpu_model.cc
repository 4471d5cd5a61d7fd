// hook/tracing/gpu_model.cc — see gpu_model.h. Completion thread only.
#include "hook/tracing/gpu_model.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "hook/core_api.h"
#include "hook/process/runtime.h"

namespace xpu::hook {
namespace {

constexpr int kMaxAttempts = 5;
constexpr uint64_t kRetryNs = 1000ull * 1000 * 1000;  // a failed call is retried a second later

// Completion-thread state (single thread: no synchronization needed).
int g_attempts = 0;
uint64_t g_next_try_ns = 0;

}  // namespace

void WriteGpuModel(xpu_ring_header_v1* h, const char* name, size_t max_len) {
  if (h == nullptr || name == nullptr) return;
  if (__atomic_load_n(&h->gpu_model[0], __ATOMIC_ACQUIRE) != 0) return;
  const size_t cap = sizeof(h->gpu_model) - 1;
  size_t n = strnlen(name, max_len < cap ? max_len : cap);
  // Trailing blanks some drivers pad names with carry no information.
  while (n > 0 && name[n - 1] == ' ') --n;
  if (n == 0) return;
  auto clean = [](char c) { return c >= 0x20 && c <= 0x7e ? c : '?'; };
  for (size_t i = 1; i < n; ++i) h->gpu_model[i] = clean(name[i]);
  h->gpu_model[n] = '\0';
  // Byte 0 last: a reader that sees it non-zero sees the whole name.
  __atomic_store_n(&h->gpu_model[0], clean(name[0]), __ATOMIC_RELEASE);
}

void PublishGpuModel(Runtime* rt) {
  xpu_ring_header_v1* h = rt->ring.header();
  if (h == nullptr || g_attempts >= kMaxAttempts) return;
  if (__atomic_load_n(&h->gpu_model[0], __ATOMIC_ACQUIRE) != 0) return;
  const int32_t dev = __atomic_load_n(&h->device, __ATOMIC_RELAXED);
  if (dev < 0) return;  // no traced op yet
  const uint64_t now = NowNs();
  if (now < g_next_try_ns) return;
  g_next_try_ns = now + kRetryNs;
  using GetProps = cudaError_t (*)(cudaDeviceProp*, int);
  static GetProps get_props =
      reinterpret_cast<GetProps>(ResolveReal(Library::kCudart, "cudaGetDeviceProperties"));
  ++g_attempts;
  if (get_props == nullptr) {
    g_attempts = kMaxAttempts;  // counted as XPU_CNT_SYMBOL_MISSING by ResolveReal
    return;
  }
  // cudaDeviceProp is about 1 KiB: a static buffer keeps it off the
  // completion thread's stack.
  static cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof(prop));
  if (get_props(&prop, dev) != cudaSuccess) {
    Count(XPU_CNT_CUDA_ERROR);
    return;
  }
  WriteGpuModel(h, prop.name, sizeof(prop.name));
}

}  // namespace xpu::hook
