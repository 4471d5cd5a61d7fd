// common/wire/signature.h — an op signature between its ABI form
// (xpu_signature_v1, include/xpu/record.h) and its wire form
// (xpu.v1.Signature): the daemon sends what it read from a ring, the engine
// decodes it and sends it back in timeline dumps, the CLI reads it from
// dumps. One mapping, field for field.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_WIRE_SIGNATURE_H_
#define XPU_COMMON_WIRE_SIGNATURE_H_

#include <cstdint>
#include <string_view>

#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::wire {

// Fills every field of `out` from `s`; `id` is the signature's id within its
// process and `name` its full name (the ABI struct holds only a prefix).
void SignatureToWire(uint32_t id, const xpu_signature_v1& s, std::string_view name,
                     xpu::v1::Signature* out);

// The ABI struct of a wire signature. Values wider than their ABI field are
// saturated; the name's first XPU_SIG_NAME_INLINE bytes are copied inline
// and name_len is the full length; commit and name_off are 0.
xpu_signature_v1 SignatureFromWire(const xpu::v1::Signature& s);

}  // namespace xpu::wire

#endif  // XPU_COMMON_WIRE_SIGNATURE_H_
