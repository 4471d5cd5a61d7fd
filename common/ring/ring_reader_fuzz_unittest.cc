// Replays the ring reader fuzz body on random and mutated inputs in every
// build, so that the gcc build exercises the same decoder paths the libFuzzer
// target does.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/ring/ring_reader_fuzz_body.h"
#include "common/ring/testing/test_ring_writer.h"

namespace xpu::ring {
namespace {

TEST(RingReaderFuzzTest, RandomInputs) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> buf(rng() % 9000);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    FuzzRingReaderOnce(buf.data(), buf.size());
  }
}

TEST(RingReaderFuzzTest, MutatedValidRings) {
  testing::TestRingConfig cfg;
  cfg.ring_capacity = 16;
  cfg.sig_capacity = 8;
  cfg.str_capacity = 256;
  auto w = testing::TestRingWriter::Create(cfg);
  ASSERT_NE(w, nullptr);
  const uint32_t s1 = w->AddSignature(XPU_OP_GEMM, "gemm");
  const uint32_t s2 = w->AddSignature(XPU_OP_KERNEL, std::string(80, 'z'));
  for (int i = 0; i < 12; ++i)
    w->Write(testing::TestRingWriter::MakeRecord(i % 2 ? s1 : s2, i, 5, XPU_REC_TIMED));
  std::vector<uint8_t> valid(w->base(), w->base() + w->size());
  // The unmutated ring is accepted in full.
  EXPECT_EQ(FuzzRingReaderOnce(valid.data(), valid.size()), 12u);
  std::mt19937_64 rng(7);
  size_t accepted_total = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> m = valid;
    const int flips = 1 + static_cast<int>(rng() % 16);
    for (int f = 0; f < flips; ++f) {
      // Bias mutations to the header, where most decisions are taken.
      const size_t pos = (rng() % 4 == 0) ? rng() % m.size() : rng() % 1280;
      m[pos] = static_cast<uint8_t>(rng());
    }
    if (rng() % 8 == 0) m.resize(rng() % m.size());  // truncated files
    accepted_total += FuzzRingReaderOnce(m.data(), m.size());
  }
  // Most single-byte mutations leave the ring readable: the body is reached.
  EXPECT_GT(accepted_total, 0u);
}

}  // namespace
}  // namespace xpu::ring
