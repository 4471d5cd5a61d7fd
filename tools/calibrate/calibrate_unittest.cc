// xpu-calibrate's options, size parsing and table; the measurement itself
// runs end to end against the GPU-less runtime in
// tests/scenarios/calibrate_e2e_test.cc.
#include "tools/calibrate/calibrate.h"

#include <gtest/gtest.h>

#include <sstream>

namespace xpu::calibrate {
namespace {

TEST(CalibrateArgsTest, DefaultsAndOverrides) {
  absl::StatusOr<CalibrateOptions> d = ParseCalibrateArgs({});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sizes, DefaultSizes());
  ASSERT_EQ(d->sizes.size(), 6u);  // 1, 4, 16, 64, 256 MiB, 1 GiB
  EXPECT_EQ(d->sizes.front(), 1ull << 20);
  EXPECT_EQ(d->sizes.back(), 1ull << 30);
  EXPECT_EQ(d->dtypes.size(), 5u);

  absl::StatusOr<CalibrateOptions> o =
      ParseCalibrateArgs({"--lib-dir", "/a", "--lib-dir=/b", "--dtypes", "BF16, fp8",
                          "--sizes=64K,1MiB", "--gemm-size", "1024", "--ops", "allreduce",
                          "--devices", "2", "--no-collectives", "--out", "/tmp/r.pb", "--json"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->lib_dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(o->dtypes, (std::vector<std::string>{"bf16", "fp8"}));
  EXPECT_EQ(o->sizes, (std::vector<uint64_t>{64ull << 10, 1ull << 20}));
  EXPECT_EQ(o->gemm_size, 1024u);
  EXPECT_EQ(o->ops, std::vector<std::string>{"allreduce"});
  EXPECT_EQ(o->devices, 2);
  EXPECT_FALSE(o->collectives);
  EXPECT_TRUE(o->gemm);
  EXPECT_EQ(o->out, "/tmp/r.pb");
  EXPECT_TRUE(o->json);
}

TEST(CalibrateArgsTest, RejectsBadInput) {
  EXPECT_FALSE(ParseCalibrateArgs({"--dtypes", "int4"}).ok());
  EXPECT_FALSE(ParseCalibrateArgs({"--ops", "gossip"}).ok());
  EXPECT_FALSE(ParseCalibrateArgs({"--sizes", "lots"}).ok());
  EXPECT_FALSE(ParseCalibrateArgs({"--gemm-size", "0"}).ok());
  EXPECT_FALSE(ParseCalibrateArgs({"--devices"}).ok());
  EXPECT_FALSE(ParseCalibrateArgs({"--frobnicate"}).ok());
  std::ostringstream out, err;
  EXPECT_EQ(CalibrateMain({"--frobnicate"}, out, err), 64);
  EXPECT_NE(err.str().find("--frobnicate"), std::string::npos);
  EXPECT_EQ(CalibrateMain({"--help"}, out, err), 0);
  EXPECT_NE(out.str().find("--lib-dir"), std::string::npos);
}

TEST(CalibrateArgsTest, Sizes) {
  EXPECT_EQ(*ParseSize("65536"), 65536u);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("16MiB"), 16ull << 20);
  EXPECT_EQ(*ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseSize("2GB"), 2ull << 30);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("0").ok());
  EXPECT_FALSE(ParseSize("-1M").ok());
  EXPECT_FALSE(ParseSize("1T").ok());
}

TEST(CalibrationTableTest, ListsEveryMeasurement) {
  xpu::v1::CalibrationReport r;
  r.set_gpu_model("NVIDIA H200");
  r.set_host("node0");
  r.set_devices(8);
  r.set_gemm_library("cublasLt");
  auto* g = r.add_gemm();
  g->set_dtype("bf16");
  g->set_tflops(712.25);
  g->set_tflops_min(700.5);
  g->set_m(8192);
  g->set_devices(8);
  auto* c = r.add_collectives();
  c->set_op("allreduce");
  c->set_bytes(64ull << 20);
  c->set_nranks(8);
  c->set_nodes(1);
  c->set_time_us(500);
  c->set_algbw_bytes_per_second(134.2e9);
  c->set_busbw_bytes_per_second(234.9e9);
  const std::string t = CalibrationTable(r);
  EXPECT_NE(t.find("NVIDIA H200 x 8 on node0"), std::string::npos) << t;
  EXPECT_NE(t.find("712.2"), std::string::npos) << t;
  EXPECT_NE(t.find("700.5"), std::string::npos) << t;
  EXPECT_NE(t.find("64 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("234.90"), std::string::npos) << t;
}

}  // namespace
}  // namespace xpu::calibrate
