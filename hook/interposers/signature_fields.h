// hook/interposers/signature_fields.h — building the signature of a traced
// call (xpu_signature_v1, include/xpu/record.h): the "none/unknown" defaults,
// saturated dimensions, CUDA and cuBLAS data / compute types mapped to
// record.h's, GEMM transpose flags, and interning by name.
//
// Launch-path rules of core_api.h apply (interning is a lock-free lookup after
// the first occurrence). Thread-safety: pure functions.
#ifndef XPU_HOOK_INTERPOSERS_SIGNATURE_FIELDS_H_
#define XPU_HOOK_INTERPOSERS_SIGNATURE_FIELDS_H_

#include <cstdint>
#include <cstring>

#include <cublas_api.h>
#include <library_types.h>

#include "hook/core_api.h"
#include "xpu/record.h"

namespace xpu::hook {

// A signature with the "none/unknown" values of record.h filled in.
inline xpu_signature_v1 MakeSignature(uint16_t kind) {
  xpu_signature_v1 sig;
  std::memset(&sig, 0, sizeof(sig));
  sig.kind = kind;
  sig.comm_rank = -1;
  sig.peer = -1;
  sig.device = -1;
  return sig;
}

inline uint32_t InternNamed(const xpu_signature_v1& sig, const char* name) {
  return InternSignature(sig, name, name ? std::strlen(name) : 0);
}

// Saturating conversion of a (possibly 64-bit, possibly negative) dimension
// into a signature's uint32 field.
inline uint32_t Dim(int64_t v) {
  if (v <= 0) return 0;
  return v > 0xFFFFFFFFll ? 0xFFFFFFFFu : static_cast<uint32_t>(v);
}

inline uint8_t CudaDataTypeToXpu(int t) {
  switch (t) {
    case CUDA_R_32F:
      return XPU_DT_F32;
    case CUDA_R_16F:
      return XPU_DT_F16;
    case CUDA_R_16BF:
      return XPU_DT_BF16;
    case CUDA_R_64F:
      return XPU_DT_F64;
    case CUDA_R_8F_E4M3:
      return XPU_DT_F8_E4M3;
    case CUDA_R_8F_E5M2:
      return XPU_DT_F8_E5M2;
    case CUDA_R_8I:
      return XPU_DT_I8;
    case CUDA_R_8U:
      return XPU_DT_U8;
    case CUDA_R_32I:
      return XPU_DT_I32;
    case CUDA_R_32U:
      return XPU_DT_U32;
    case CUDA_R_64I:
      return XPU_DT_I64;
    case CUDA_R_64U:
      return XPU_DT_U64;
    case CUDA_C_32F:
      return XPU_DT_C32;
    case CUDA_C_64F:
      return XPU_DT_C64;
    default:
      return XPU_DT_UNKNOWN;
  }
}

// cublasComputeType_t (shared by cuBLAS and cuBLASLt). The TF32 and
// reduced-precision "fast" modes accumulate in FP32, which is what the
// signature records (record.h: XPU_DT_F32 for tf32 too).
inline uint8_t ComputeTypeToXpu(int c) {
  switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return XPU_DT_F16;
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return XPU_DT_F32;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
      return XPU_DT_F64;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      return XPU_DT_I32;
    default:
      return XPU_DT_UNKNOWN;
  }
}

inline uint8_t GemmFlags(int transa, int transb) {
  uint8_t f = 0;
  if (transa == CUBLAS_OP_T || transa == CUBLAS_OP_C) f |= XPU_GEMM_TRANSA;
  if (transb == CUBLAS_OP_T || transb == CUBLAS_OP_C) f |= XPU_GEMM_TRANSB;
  return f;
}

// Interns a plain-kernel signature named `name` (nullptr: "<unnamed kernel>").
inline uint32_t InternKernel(const char* name) {
  xpu_signature_v1 sig = MakeSignature(XPU_OP_KERNEL);
  return InternNamed(sig, name ? name : "<unnamed kernel>");
}

}  // namespace xpu::hook

#endif  // XPU_HOOK_INTERPOSERS_SIGNATURE_FIELDS_H_
