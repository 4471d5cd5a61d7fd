#include "daemon/gpu_model.h"

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <vector>
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

GpuIdentity ReadGpuIdentity(const ring::RingReader& reader) {
  constexpr size_t kEnd = offsetof(xpu_ring_header_v1, gpu_pci_bus_id) +
                          sizeof(xpu_ring_header_v1::gpu_pci_bus_id);
  GpuIdentity out;
  xpu_ring_header_v1 h;
  if (!reader.CopyHeaderPage(&h, kEnd) || h.gpu_model[0] == 0) return out;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!reader.CopyHeaderPage(&h, kEnd) || h.gpu_model[0] == 0) return out;
  out.model = ring::SanitizeName(h.gpu_model, strnlen(h.gpu_model, sizeof(h.gpu_model)));
  out.uuid = ring::SanitizeName(h.gpu_uuid, strnlen(h.gpu_uuid, sizeof(h.gpu_uuid)));
  out.pci_bus_id =
      ring::SanitizeName(h.gpu_pci_bus_id, strnlen(h.gpu_pci_bus_id, sizeof(h.gpu_pci_bus_id)));
  return out;
}

bool ParsePciBusId(const std::string& s, uint64_t* key) {
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  int used = -1;
  // Hex digits only (no sign, no 0x), and nothing after the function.
  if (s.empty() || s.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos ||
      std::sscanf(s.c_str(), "%lx:%lx:%lx.%lx%n", &domain, &bus, &device, &function, &used) != 4 ||
      used != static_cast<int>(s.size()))
    return false;
  if (domain > 0xffffffffu || bus > 0xff || device > 0x1f || function > 7) return false;
  *key = (static_cast<uint64_t>(domain) << 32) | (bus << 16) | (device << 8) | function;
  return true;
}

int GpuIndexOfPciBusId(const std::string& pci_bus_id, const std::string& driver_dir) {
  uint64_t want = 0;
  if (!ParsePciBusId(pci_bus_id, &want)) return -1;
  static std::mutex mu;
  static std::map<std::string, std::pair<std::vector<uint64_t>, std::chrono::steady_clock::time_point>>
      cache;  // driver_dir -> sorted bus ids, when read
  std::lock_guard<std::mutex> l(mu);
  const auto now = std::chrono::steady_clock::now();
  auto it = cache.find(driver_dir);
  auto lookup = [&](const std::vector<uint64_t>& ids) {
    auto at = std::lower_bound(ids.begin(), ids.end(), want);
    return at != ids.end() && *at == want ? static_cast<int>(at - ids.begin()) : -1;
  };
  if (it != cache.end()) {
    const int index = lookup(it->second.first);
    if (index >= 0 || now - it->second.second < std::chrono::minutes(1)) return index;
  }
  std::vector<uint64_t> ids;
  if (DIR* d = opendir(driver_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      uint64_t key = 0;
      if (ParsePciBusId(e->d_name, &key)) ids.push_back(key);
    }
    closedir(d);
  }
  std::sort(ids.begin(), ids.end());
  const int index = lookup(ids);
  cache[driver_dir] = {std::move(ids), now};
  return index;
}

}  // namespace xpu::daemon
