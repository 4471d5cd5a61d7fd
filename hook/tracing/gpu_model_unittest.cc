// WriteGpuModel: the ring.h ordering contract's writer side, bounds and
// sanitising, and write-once.
#include "hook/tracing/gpu_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace xpu::hook {
namespace {

TEST(GpuModelTest, WritesOnceTrimmedAndPrintable) {
  auto h = std::make_unique<xpu_ring_header_v1>();
  std::memset(h.get(), 0, sizeof(*h));
  WriteGpuModel(h.get(), "", 64);
  EXPECT_EQ(h->gpu_model[0], 0) << "an empty name publishes nothing";
  WriteGpuModel(h.get(), "NVIDIA H200\x01   ", 64);
  EXPECT_STREQ(h->gpu_model, "NVIDIA H200?");
  WriteGpuModel(h.get(), "Other", 64);
  EXPECT_STREQ(h->gpu_model, "NVIDIA H200?") << "written once";
}

TEST(GpuModelTest, LongNamesAreTruncatedInsideTheField) {
  auto h = std::make_unique<xpu_ring_header_v1>();
  std::memset(h.get(), 0, sizeof(*h));
  char name[256];
  std::memset(name, 'x', sizeof(name));  // no NUL within max_len
  WriteGpuModel(h.get(), name, sizeof(name));
  EXPECT_EQ(strnlen(h->gpu_model, sizeof(h->gpu_model)), sizeof(h->gpu_model) - 1);
  EXPECT_EQ(h->job_name[0], 0) << "neighbouring fields untouched";
  EXPECT_EQ(h->reserved_identity[0], 0);
}

TEST(GpuModelTest, UuidAndPciBusIdAreWrittenBeforeTheModel) {
  auto h = std::make_unique<xpu_ring_header_v1>();
  std::memset(h.get(), 0, sizeof(*h));
  const unsigned char uuid[16] = {0x60, 0x4a, 0xc7, 0x6c, 0xd9, 0xcf, 0xfe, 0xf3,
                                  0x62, 0xe9, 0xd9, 0x20, 0x44, 0xab, 0x6e, 0x52};
  GpuIdentity g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.name_len = 256;
  g.uuid = uuid;
  g.pci_domain = 0;
  g.pci_bus = 0x1b;
  g.pci_device = 0;
  WriteGpuIdentity(h.get(), g);
  EXPECT_STREQ(h->gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_STREQ(h->gpu_uuid, "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  EXPECT_STREQ(h->gpu_pci_bus_id, "00000000:1B:00.0");
  // Published once: a second identity changes nothing.
  g.pci_bus = 0x2c;
  WriteGpuIdentity(h.get(), g);
  EXPECT_STREQ(h->gpu_pci_bus_id, "00000000:1B:00.0");
}

TEST(GpuModelTest, AnAllZeroUuidAndUnknownPciAreLeftEmpty) {
  auto h = std::make_unique<xpu_ring_header_v1>();
  std::memset(h.get(), 0, sizeof(*h));
  const unsigned char zero[16] = {};
  GpuIdentity g;
  g.name = "XPU Fake GPU";
  g.name_len = 64;
  g.uuid = zero;
  WriteGpuIdentity(h.get(), g);
  EXPECT_STREQ(h->gpu_model, "XPU Fake GPU");
  EXPECT_EQ(h->gpu_uuid[0], 0);
  EXPECT_EQ(h->gpu_pci_bus_id[0], 0);
}

}  // namespace
}  // namespace xpu::hook
