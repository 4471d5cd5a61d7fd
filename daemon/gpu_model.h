// gpu_model.h — the GPU model a hooked process publishes in its ring header
// after hand-over (xpu_ring_header_v1.gpu_model, include/xpu/ring.h), for
// ProcessIdentity.gpu_model: the engine keys history baselines and
// calibrations by it.
//
// The field is written once, byte 0 last with a release store; the reader
// copies the header prefix, and when byte 0 is set, copies it again after an
// acquire fence so that the name is complete. The bytes are hostile:
// bounded (NUL within 64 bytes or truncated), sanitised to printable ASCII.
// Thread-safety: as RingReader (the collector's thread).
#ifndef XPU_DAEMON_GPU_MODEL_H_
#define XPU_DAEMON_GPU_MODEL_H_

#include <string>

#include "common/ring/ring_reader.h"

namespace xpu::daemon {

// Empty while the hook has not published it (or the mapping faulted).
std::string ReadGpuModel(const ring::RingReader& reader);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_GPU_MODEL_H_
