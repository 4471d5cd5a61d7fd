// daemon/evidence/gpu_health.cc — see gpu_health.h. NVML's C ABI is declared
// here by hand (opaque handles, int return codes) to avoid a build
// dependency on the NVML headers.
#include "daemon/evidence/gpu_health.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace xpu::daemon {
namespace {

using nvmlDevice = void*;
using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, nvmlDevice*);
using EccFn = int (*)(nvmlDevice, int, int, unsigned long long*);
using ReasonsFn = int (*)(nvmlDevice, unsigned long long*);
using TempFn = int (*)(nvmlDevice, int, unsigned*);

constexpr int kNvmlSuccess = 0;
constexpr int kEccUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;     // NVML_VOLATILE_ECC
constexpr int kTempGpu = 0;         // NVML_TEMPERATURE_GPU

}  // namespace

std::string GpuHealthSummary() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return "unavailable: libnvidia-ml.so.1 not found";
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto ecc = reinterpret_cast<EccFn>(dlsym(lib, "nvmlDeviceGetTotalEccErrors"));
  auto reasons = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
  if (reasons == nullptr) {
    reasons = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
  }
  auto temp = reinterpret_cast<TempFn>(dlsym(lib, "nvmlDeviceGetTemperature"));
  if (init == nullptr || count == nullptr || handle == nullptr) {
    return "unavailable: libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
  }
  static int init_rc = init();
  if (init_rc != kNvmlSuccess)
    return "unavailable: nvmlInit_v2 returned " + std::to_string(init_rc);
  unsigned n = 0;
  if (count(&n) != kNvmlSuccess) return "unavailable: nvmlDeviceGetCount_v2 failed";
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice dev = nullptr;
    char line[256];
    if (handle(i, &dev) != kNvmlSuccess) {
      snprintf(line, sizeof(line), "gpu %u: no handle (lost?)\n", i);
      out += line;
      continue;
    }
    unsigned long long ecc_unc = 0, why = 0;
    unsigned t = 0;
    bool has_ecc =
        ecc != nullptr && ecc(dev, kEccUncorrected, kVolatileEcc, &ecc_unc) == kNvmlSuccess;
    bool has_why = reasons != nullptr && reasons(dev, &why) == kNvmlSuccess;
    bool has_t = temp != nullptr && temp(dev, kTempGpu, &t) == kNvmlSuccess;
    snprintf(line, sizeof(line),
             "gpu %u: ecc_uncorrected_volatile %s clock_event_reasons %s temp_c %s\n", i,
             has_ecc ? std::to_string(ecc_unc).c_str() : "n/a",
             has_why ? std::to_string(why).c_str() : "n/a",
             has_t ? std::to_string(t).c_str() : "n/a");
    out += line;
  }
  out += "xid: not observable by a one-shot probe (see the kernel log / DCGM)\n";
  return out;
}

}  // namespace xpu::daemon
