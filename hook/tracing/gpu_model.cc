// hook/tracing/gpu_model.cc — see gpu_model.h. Completion thread only.
#include "hook/tracing/gpu_model.h"

#include <cuda_runtime_api.h>

#include <cstdio>
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

void FormatGpuUuid(const unsigned char uuid[16], char out[41]) {
  static const char kHex[] = "0123456789abcdef";
  char* o = out;
  *o++ = 'G';
  *o++ = 'P';
  *o++ = 'U';
  for (int i = 0; i < 16; ++i) {
    if (i == 0 || i == 4 || i == 6 || i == 8 || i == 10) *o++ = '-';
    *o++ = kHex[uuid[i] >> 4];
    *o++ = kHex[uuid[i] & 15];
  }
  *o = '\0';
}

void WriteGpuIdentity(xpu_ring_header_v1* h, const GpuIdentity& g) {
  if (h == nullptr || g.name == nullptr) return;
  if (__atomic_load_n(&h->gpu_model[0], __ATOMIC_ACQUIRE) != 0) return;
  bool any = false;
  for (int i = 0; g.uuid != nullptr && i < 16; ++i) any = any || g.uuid[i] != 0;
  if (any) {
    static_assert(sizeof(h->gpu_uuid) >= 41, "room for the UUID");
    FormatGpuUuid(g.uuid, h->gpu_uuid);
  }
  if (g.pci_domain >= 0 && g.pci_bus >= 0 && g.pci_device >= 0) {
    std::snprintf(h->gpu_pci_bus_id, sizeof(h->gpu_pci_bus_id), "%08X:%02X:%02X.0",
                  static_cast<unsigned>(g.pci_domain), static_cast<unsigned>(g.pci_bus),
                  static_cast<unsigned>(g.pci_device));
  }
  WriteGpuModel(h, g.name, g.name_len);  // byte 0 of the model last (release)
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
  GpuIdentity g;
  g.name = prop.name;
  g.name_len = sizeof(prop.name);
  g.uuid = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  g.pci_domain = prop.pciDomainID;
  g.pci_bus = prop.pciBusID;
  g.pci_device = prop.pciDeviceID;
  WriteGpuIdentity(h, g);
}

}  // namespace xpu::hook
