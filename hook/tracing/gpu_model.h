// hook/tracing/gpu_model.h — publishes the GPU model name into the ring header
// (xpu_ring_header_v1.gpu_model, include/xpu/ring.h) so that the engine can
// key history and calibration by it.
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

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_GPU_MODEL_H_
