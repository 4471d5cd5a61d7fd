// common/wire/signature.cc — see signature.h.
#include "common/wire/signature.h"

#include <algorithm>
#include <cstring>

namespace xpu::wire {

void SignatureToWire(uint32_t id, const xpu_signature_v1& s, std::string_view name,
                     xpu::v1::Signature* out) {
  out->set_id(id);
  out->set_kind(s.kind);
  out->set_dtype(s.dtype);
  out->set_gemm_flags(s.gemm_flags);
  out->set_name(std::string(name));
  out->set_m(s.m);
  out->set_n(s.n);
  out->set_k(s.k);
  out->set_batch(s.batch);
  out->set_count(s.count);
  out->set_comm_id(s.comm_id);
  out->set_comm_rank(s.comm_rank);
  out->set_comm_nranks(s.comm_nranks);
  out->set_peer(s.peer);
  out->set_device(s.device);
  out->set_out_dtype(s.out_dtype);
  out->set_compute_type(s.compute_type);
}

xpu_signature_v1 SignatureFromWire(const xpu::v1::Signature& s) {
  xpu_signature_v1 a{};
  a.kind = static_cast<uint16_t>(std::min<uint32_t>(s.kind(), UINT16_MAX));
  a.dtype = static_cast<uint8_t>(std::min<uint32_t>(s.dtype(), UINT8_MAX));
  a.gemm_flags = static_cast<uint8_t>(s.gemm_flags() & 0xff);
  a.name_len = static_cast<uint32_t>(s.name().size());
  a.m = s.m();
  a.n = s.n();
  a.k = s.k();
  a.batch = s.batch();
  a.count = s.count();
  a.comm_id = s.comm_id();
  a.comm_rank = s.comm_rank();
  a.comm_nranks = s.comm_nranks();
  a.peer = s.peer();
  a.device = s.device();
  a.out_dtype = static_cast<uint8_t>(std::min<uint32_t>(s.out_dtype(), UINT8_MAX));
  a.compute_type = static_cast<uint8_t>(std::min<uint32_t>(s.compute_type(), UINT8_MAX));
  std::memcpy(a.name, s.name().data(), std::min<size_t>(s.name().size(), XPU_SIG_NAME_INLINE));
  return a;
}

}  // namespace xpu::wire
