// daemon/evidence/gpu_health.h — GPU health from NVML, loaded with dlopen so
// that the daemon runs (and answers "unavailable") on machines without it.
//
// Reported per device: uncorrected volatile ECC errors, retired/remapped
// pages are left to operations tooling; the clock-event (throttle) reasons
// bitmask; temperature. XID errors arrive only as NVML events registered
// before they happen, so a one-shot probe cannot list past ones: the summary
// says so instead of pretending there were none.
//
// Thread-safety: GpuHealthSummary serialises its NVML calls internally.
#ifndef XPU_DAEMON_EVIDENCE_GPU_HEALTH_H_
#define XPU_DAEMON_EVIDENCE_GPU_HEALTH_H_

#include <string>

namespace xpu::daemon {

// One line per device, or "unavailable: <reason>".
std::string GpuHealthSummary();

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_GPU_HEALTH_H_
