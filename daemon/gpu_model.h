// gpu_model.h — the GPU a hooked process publishes in its ring header after
// hand-over (xpu_ring_header_v1.gpu_model, gpu_uuid, gpu_pci_bus_id,
// include/xpu/ring.h), for ProcessIdentity: the engine keys history
// baselines and calibrations by the model and labels a rank's series with
// the GPU's UUID and index as dcgm-exporter does.
//
// The field is written once, byte 0 last with a release store; the reader
// copies the header prefix, and when byte 0 is set, copies it again after an
// acquire fence so that the name is complete. The bytes are hostile:
// bounded (NUL within 64 bytes or truncated), sanitised to printable ASCII.
// Thread-safety: as RingReader (the collector's thread).
#ifndef XPU_DAEMON_GPU_MODEL_H_
#define XPU_DAEMON_GPU_MODEL_H_

#include <cstdint>
#include <string>

#include "common/ring/ring_reader.h"

namespace xpu::daemon {

// Empty while the hook has not published it (or the mapping faulted).
std::string ReadGpuModel(const ring::RingReader& reader);

// The GPU a process published: model, UUID and PCI bus id (written before
// the model's byte 0, so complete once the model is there). All empty while
// unpublished; UUID and bus id empty when the runtime gave none.
struct GpuIdentity {
  std::string model, uuid, pci_bus_id;
};
GpuIdentity ReadGpuIdentity(const ring::RingReader& reader);

// The GPU's index on this node as nvidia-smi and dcgm-exporter number them
// (NVML orders GPUs by PCI bus id): the position of `pci_bus_id` among the
// GPUs the driver lists under `driver_dir` (/proc/driver/nvidia/gpus, one
// directory per GPU named by its bus id), or -1 when it is not listed. The
// listing is cached and re-read at most once a minute.
int GpuIndexOfPciBusId(const std::string& pci_bus_id,
                       const std::string& driver_dir = "/proc/driver/nvidia/gpus");
// "00000000:1B:00.0" and "0000:1b:00.0" are one bus id: (domain, bus,
// device, function) as numbers; false when it does not parse.
bool ParsePciBusId(const std::string& s, uint64_t* key);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_GPU_MODEL_H_
