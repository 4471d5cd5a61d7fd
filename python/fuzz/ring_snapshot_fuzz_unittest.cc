// Replays the Python ring parser's fuzz body on random and mutated rings in
// every build (the fast form of `make fuzz`).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/ring/testing/test_ring_writer.h"
#include "ring_snapshot_fuzz_body.h"

namespace xpu::python {
namespace {

TEST(RingSnapshotFuzzTest, RandomInputs) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> buf(rng() % 9000);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    FuzzRingSnapshotOnce(buf.data(), buf.size());
  }
}

TEST(RingSnapshotFuzzTest, MutatedValidRings) {
  ring::testing::TestRingConfig cfg;
  cfg.ring_capacity = 16;
  cfg.sig_capacity = 8;
  cfg.str_capacity = 256;
  auto w = ring::testing::TestRingWriter::Create(cfg);
  ASSERT_NE(w, nullptr);
  const uint32_t s1 = w->AddSignature(XPU_OP_GEMM, "gemm");
  const uint32_t s2 = w->AddSignature(XPU_OP_KERNEL, std::string(80, 'z'));
  for (int i = 0; i < 12; ++i) {
    w->Write(ring::testing::TestRingWriter::MakeRecord(i % 2 ? s1 : s2, i, 5, XPU_REC_TIMED));
  }
  std::vector<uint8_t> valid(w->base(), w->base() + w->size());
  EXPECT_EQ(FuzzRingSnapshotOnce(valid.data(), valid.size()), 12u);
  std::mt19937_64 rng(7);
  size_t accepted_total = 0;
  for (int i = 0; i < 5000; ++i) {
    std::vector<uint8_t> m = valid;
    const int flips = 1 + static_cast<int>(rng() % 16);
    for (int f = 0; f < flips; ++f) {
      const size_t pos = (rng() % 4 == 0) ? rng() % m.size() : rng() % 1280;
      m[pos] = static_cast<uint8_t>(rng());
    }
    if (rng() % 8 == 0) m.resize(rng() % m.size());
    accepted_total += FuzzRingSnapshotOnce(m.data(), m.size());
  }
  EXPECT_GT(accepted_total, 0u);  // the record paths were reached
}

}  // namespace
}  // namespace xpu::python
