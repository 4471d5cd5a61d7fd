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

}  // namespace
}  // namespace xpu::hook
