// common/wire/signature_unittest.cc
#include "common/wire/signature.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace xpu::wire {
namespace {

TEST(SignatureWireTest, EveryFieldRoundTrips) {
  xpu_signature_v1 s{};
  s.kind = XPU_OP_GEMM;
  s.dtype = XPU_DT_BF16;
  s.gemm_flags = XPU_GEMM_TRANSA;
  s.m = 1;
  s.n = 2;
  s.k = 3;
  s.batch = 4;
  s.count = 5;
  s.comm_id = 6;
  s.comm_rank = 7;
  s.comm_nranks = 8;
  s.peer = 9;
  s.device = 10;
  s.out_dtype = 11;
  s.compute_type = 12;
  const std::string name = "cublasGemmEx";
  s.name_len = static_cast<uint32_t>(name.size());
  std::memcpy(s.name, name.data(), name.size());
  xpu::v1::Signature w;
  SignatureToWire(42, s, name, &w);
  EXPECT_EQ(w.id(), 42u);
  EXPECT_EQ(w.name(), name);
  const xpu_signature_v1 back = SignatureFromWire(w);
  EXPECT_EQ(std::memcmp(&back, &s, sizeof(s)), 0);
}

TEST(SignatureWireTest, WideValuesSaturateAndLongNamesKeepTheirPrefix) {
  xpu::v1::Signature w;
  w.set_kind(1u << 20);
  w.set_dtype(1000);
  w.set_gemm_flags(0x1ff);
  w.set_out_dtype(300);
  w.set_compute_type(70000);
  w.set_name(std::string(200, 'x'));
  const xpu_signature_v1 a = SignatureFromWire(w);
  EXPECT_EQ(a.kind, UINT16_MAX);
  EXPECT_EQ(a.dtype, UINT8_MAX);
  EXPECT_EQ(a.gemm_flags, 0xff);
  EXPECT_EQ(a.out_dtype, UINT8_MAX);
  EXPECT_EQ(a.compute_type, UINT8_MAX);
  EXPECT_EQ(a.name_len, 200u);
  EXPECT_EQ(std::string(a.name, XPU_SIG_NAME_INLINE), std::string(XPU_SIG_NAME_INLINE, 'x'));
  EXPECT_EQ(a.commit, 0u);
}

}  // namespace
}  // namespace xpu::wire
