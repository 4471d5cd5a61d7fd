// ReadGpuModel against a ring written from ring.h alone: unknown until the
// producer sets byte 0, then the name; hostile bytes are bounded and
// sanitised.
#include "daemon/gpu_model.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstring>

#include "common/ring/testing/test_ring_writer.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;

std::unique_ptr<ring::RingReader> ReaderOf(TestRingWriter& w) {
  ring::RingReaderOptions o;
  o.read_only = true;
  auto r = ring::RingReader::FromFd(w.fd(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : nullptr;
}

// As ring.h specifies: bytes 1.. first, byte 0 last (release).
void Publish(xpu_ring_header_v1* h, const char* name) {
  const size_t n = strlen(name);
  memcpy(h->gpu_model + 1, name + 1, n);  // includes the NUL
  __atomic_store_n(&h->gpu_model[0], name[0], __ATOMIC_RELEASE);
}

TEST(GpuModelTest, EmptyUntilPublishedThenTheName) {
  auto w = TestRingWriter::Create(TestRingConfig());
  ASSERT_NE(w, nullptr);
  auto r = ReaderOf(*w);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(ReadGpuModel(*r), "");
  // Bytes after byte 0 without byte 0: still unknown (a write in progress).
  memcpy(w->header()->gpu_model + 1, "VIDIA", 5);
  EXPECT_EQ(ReadGpuModel(*r), "");
  Publish(w->header(), "NVIDIA H200");
  EXPECT_EQ(ReadGpuModel(*r), "NVIDIA H200");
}

TEST(GpuModelTest, HostileBytesAreBoundedAndSanitised) {
  auto w = TestRingWriter::Create(TestRingConfig());
  ASSERT_NE(w, nullptr);
  auto r = ReaderOf(*w);
  ASSERT_NE(r, nullptr);
  xpu_ring_header_v1* h = w->header();
  memset(h->gpu_model, 'A', sizeof(h->gpu_model));  // no NUL inside the field
  h->gpu_model[3] = '\n';
  h->gpu_model[4] = static_cast<char>(0xff);
  std::string m = ReadGpuModel(*r);
  EXPECT_EQ(m.size(), sizeof(h->gpu_model));
  EXPECT_EQ(m.substr(0, 6), "AAA??A");
}

TEST(GpuModelTest, IdentityComesWithTheModel) {
  auto w = TestRingWriter::Create(TestRingConfig());
  ASSERT_NE(w, nullptr);
  auto r = ReaderOf(*w);
  ASSERT_NE(r, nullptr);
  strcpy(w->header()->gpu_uuid, "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  strcpy(w->header()->gpu_pci_bus_id, "00000000:1B:00.0");
  EXPECT_EQ(ReadGpuIdentity(*r).uuid, "") << "not published before the model";
  Publish(w->header(), "NVIDIA H100 80GB HBM3");
  GpuIdentity g = ReadGpuIdentity(*r);
  EXPECT_EQ(g.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.uuid, "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  EXPECT_EQ(g.pci_bus_id, "00000000:1B:00.0");
}

TEST(GpuModelTest, GpuIndexIsThePositionInPciOrder) {
  char tmpl[] = "/tmp/xpu_gpus_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  // As the driver names them: 4-digit domain, lower-case hex.
  for (const char* bus : {"0000:db:00.0", "0000:1b:00.0", "0000:9a:00.0", "0000:07:00.0"}) {
    ASSERT_EQ(mkdir((dir + "/" + bus).c_str(), 0700), 0);
  }
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:07:00.0", dir), 0);
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:1B:00.0", dir), 1);
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:9A:00.0", dir), 2);
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:DB:00.0", dir), 3);
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:DC:00.0", dir), -1);
  EXPECT_EQ(GpuIndexOfPciBusId("", dir), -1);
  EXPECT_EQ(GpuIndexOfPciBusId("garbage", dir), -1);
  EXPECT_EQ(GpuIndexOfPciBusId("00000000:07:00.0", dir + "/missing"), -1);
  uint64_t a = 0, b = 0;
  ASSERT_TRUE(ParsePciBusId("00000000:1B:00.0", &a));
  ASSERT_TRUE(ParsePciBusId("0000:1b:00.0", &b));
  EXPECT_EQ(a, b);
  EXPECT_FALSE(ParsePciBusId("0000:1b:00.0x", &a));
}

}  // namespace
}  // namespace xpu::daemon
