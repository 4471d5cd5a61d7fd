#include "daemon/gpu_model.h"

#include <atomic>
#include <cstddef>
#include <cstring>

namespace xpu::daemon {

std::string ReadGpuModel(const ring::RingReader& reader) {
  constexpr size_t kEnd =
      offsetof(xpu_ring_header_v1, gpu_model) + sizeof(xpu_ring_header_v1::gpu_model);
  xpu_ring_header_v1 h;
  if (!reader.CopyHeaderPage(&h, kEnd) || h.gpu_model[0] == 0) return "";
  // Pairs with the writer's release store of byte 0: the second copy sees
  // every byte written before it.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!reader.CopyHeaderPage(&h, kEnd) || h.gpu_model[0] == 0) return "";
  return ring::SanitizeName(h.gpu_model, strnlen(h.gpu_model, sizeof(h.gpu_model)));
}

}  // namespace xpu::daemon
