// hook/tracing/gpu_model.h — publishes the GPU model name, UUID and PCI bus
// id into the ring header (xpu_ring_header_v1.gpu_model, gpu_uuid,
// gpu_pci_bus_id, include/xpu/ring.h) so that the engine can key history and
// calibration by the model and label a rank's series with its GPU the way
// dcgm-exporter does.
//
// Completion thread only (Housekeeping, with the reentrancy guard held):
// cudaGetDeviceProperties is slow and is never called on the launch path. It
// runs once the first traced op has set the header's `device`; a failed call
// is counted (XPU_CNT_CUDA_ERROR) and retried once a second, five times at
// most, then given up (the engine then keys the job by an unknown model).
#ifndef XPU_HOOK_TRACING_GPU_MODEL_H_
#define XPU_HOOK_TRACING_GPU_MODEL_H_

#include <cstddef>

#include "xpu/ring.h"

namespace xpu::hook {

struct Runtime;

// One step; cheap (an acquire load) once the model is published or given up.
void PublishGpuModel(Runtime* rt);

// Writes `name` (sanitised to printable ASCII, at most 63 characters) into
// h->gpu_model with the ordering ring.h specifies; a second call does nothing.
// Exposed for tests.
void WriteGpuModel(xpu_ring_header_v1* h, const char* name, size_t max_len);

// The GPU as cudaGetDeviceProperties describes it. uuid: 16 bytes or
// nullptr; pci_*: -1 when unknown.
struct GpuIdentity {
  const char* name = nullptr;
  size_t name_len = 0;
  const unsigned char* uuid = nullptr;
  int pci_domain = -1, pci_bus = -1, pci_device = -1;
};
// Writes gpu_uuid and gpu_pci_bus_id, then the model (whose byte 0 is the
// release store readers wait for); nothing when the model is already there.
void WriteGpuIdentity(xpu_ring_header_v1* h, const GpuIdentity& g);
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (NVML's spelling) into out[41].
void FormatGpuUuid(const unsigned char uuid[16], char out[41]);

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_GPU_MODEL_H_
