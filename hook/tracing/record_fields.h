// hook/tracing/record_fields.h — encoders of xpu_record_v1 fields
// (include/xpu/record.h), shared by every writer of records in the core: the
// launch path (gpu_op.cc), host events (process/runtime.cc), the completion
// thread and the profiling windows. Pure functions, inline so that the launch
// path pays no call for them.
#ifndef XPU_HOOK_TRACING_RECORD_FIELDS_H_
#define XPU_HOOK_TRACING_RECORD_FIELDS_H_

#include <cstdint>

#include "xpu/record.h"

namespace xpu::hook {

// Duration field encoding (record.h): ns below 2^32, else us with
// XPU_REC_DUR_US, else saturated with XPU_REC_DUR_SATURATED as well.
inline uint32_t EncodeDuration(uint64_t ns, uint16_t* flags) {
  if (ns <= UINT32_MAX) return static_cast<uint32_t>(ns);
  *flags |= XPU_REC_DUR_US;
  uint64_t us = ns / 1000;
  if (us <= UINT32_MAX) return static_cast<uint32_t>(us);
  *flags |= XPU_REC_DUR_SATURATED;
  return UINT32_MAX;
}

// GPU start minus CPU launch, saturated to int32.
inline int32_t SaturateI32(int64_t v) {
  if (v > INT32_MAX) return INT32_MAX;
  if (v < INT32_MIN) return INT32_MIN;
  return static_cast<int32_t>(v);
}

}  // namespace xpu::hook

#endif  // XPU_HOOK_TRACING_RECORD_FIELDS_H_
