// hook/tracing/signatures_unittest.cc — signature interning.
// Thread-safety: ConcurrentInterningAgrees interns from 4 threads; the rest
// is single-threaded.
#include "hook/tracing/signatures.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace xpu::hook {
namespace {

class SignaturesTest : public ::testing::Test {
 protected:
  void Make(uint32_t sig_capacity, uint64_t str_capacity = 4096) {
    layout_ = ComputeLayout(64, sig_capacity, str_capacity);
    mem_.assign(layout_.file_size + 4096, 0);
    void* base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem_.data()) + 4095) &
                                         ~uintptr_t{4095});
    ring_ = std::make_unique<RingWriter>();
    ring_->Adopt(base, layout_, RingIdentity{});
    table_ = std::make_unique<SignatureTable>();
    table_->Init(ring_.get());
  }
  static xpu_signature_v1 Gemm(uint32_t m) {
    xpu_signature_v1 s;
    memset(&s, 0, sizeof(s));
    s.kind = XPU_OP_GEMM;
    s.dtype = XPU_DT_BF16;
    s.m = m;
    s.n = 64;
    s.k = 32;
    s.batch = 1;
    s.comm_rank = -1;
    s.peer = -1;
    return s;
  }
  uint32_t Intern(const xpu_signature_v1& s, const std::string& name) {
    return table_->Intern(s, name.data(), name.size());
  }

  RingLayout layout_;
  std::vector<uint8_t> mem_;
  std::unique_ptr<RingWriter> ring_;
  std::unique_ptr<SignatureTable> table_;
};

TEST_F(SignaturesTest, SameSignatureSameIdDifferentDifferent) {
  Make(64);
  uint32_t a = Intern(Gemm(128), "cublasGemmEx");
  ASSERT_GE(a, 1u);
  EXPECT_EQ(Intern(Gemm(128), "cublasGemmEx"), a);
  uint32_t b = Intern(Gemm(256), "cublasGemmEx");
  EXPECT_NE(b, 0u);
  EXPECT_NE(b, a);
  uint32_t c = Intern(Gemm(128), "cublasLtMatmul");
  EXPECT_NE(c, a);
  EXPECT_NE(c, b);
  // Caller garbage in commit/name/reserved does not change the identity.
  xpu_signature_v1 g = Gemm(128);
  g.commit = 77;
  memset(g.name, 'z', sizeof(g.name));
  g.reserved1 = 9;
  EXPECT_EQ(Intern(g, "cublasGemmEx"), a);
  EXPECT_EQ(table_->KindOf(a), XPU_OP_GEMM);
  // Published into the ring: commit == id, fields as given.
  const xpu_signature_v1& e = ring_->signatures()[a];
  EXPECT_EQ(e.commit, a);
  EXPECT_EQ(e.m, 128u);
  EXPECT_EQ(e.name_len, 12u);
  EXPECT_EQ(std::string(e.name, e.name_len), "cublasGemmEx");
  EXPECT_GE(ring_->header()->sig_count, uint64_t{c} + 1);
}

TEST_F(SignaturesTest, ConcurrentInterningAgrees) {
  Make(1024);
  constexpr int kThreads = 4;
  constexpr uint32_t kSigs = 300;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kSigs));
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      for (uint32_t j = 0; j < kSigs; ++j) {
        uint32_t i = (t % 2 == 0) ? j : kSigs - 1 - j;  // opposite orders collide more
        ids[t][i] = Intern(Gemm(i + 1), "k" + std::to_string(i % 7));
      }
    });
  }
  for (auto& x : th) x.join();
  for (uint32_t i = 0; i < kSigs; ++i) {
    ASSERT_NE(ids[0][i], 0u);
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(ids[t][i], ids[0][i]) << "sig " << i;
  }
  EXPECT_EQ(table_->size(), kSigs);  // no id wasted on a lost race
  for (uint32_t i = 0; i < kSigs; ++i) {
    const xpu_signature_v1& e = ring_->signatures()[ids[0][i]];
    EXPECT_EQ(e.commit, ids[0][i]);
    EXPECT_EQ(e.m, i + 1);
  }
}

TEST_F(SignaturesTest, LongNamesGoToTheArena) {
  Make(64);
  std::string name(100, 'a');
  for (size_t i = 0; i < name.size(); ++i) name[i] = static_cast<char>('a' + i % 26);
  uint32_t id = Intern(Gemm(1), name);
  ASSERT_NE(id, 0u);
  const xpu_signature_v1& e = ring_->signatures()[id];
  EXPECT_EQ(e.name_len, 100u);
  EXPECT_EQ(std::string(e.name, XPU_SIG_NAME_INLINE), name.substr(0, XPU_SIG_NAME_INLINE));
  ASSERT_LE(uint64_t{e.name_off} + e.name_len, ring_->header()->str_used);
  EXPECT_EQ(std::string(ring_->arena() + e.name_off, e.name_len), name);
  // Exactly 56 bytes stay inline.
  uint32_t id56 = Intern(Gemm(2), name.substr(0, XPU_SIG_NAME_INLINE));
  EXPECT_EQ(ring_->signatures()[id56].name_len, uint32_t{XPU_SIG_NAME_INLINE});
  EXPECT_EQ(ring_->header()->str_used, 100u);
}

TEST_F(SignaturesTest, ArenaFullTruncatesToInlinePrefix) {
  Make(64, 4096);
  std::string big(3000, 'q');
  uint32_t a = Intern(Gemm(1), big);
  uint32_t b = Intern(Gemm(2), big);  // does not fit any more
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(ring_->signatures()[a].name_len, 3000u);
  EXPECT_EQ(ring_->signatures()[b].name_len, uint32_t{XPU_SIG_NAME_INLINE});
  EXPECT_EQ(ring_->Counter(XPU_CNT_STR_ARENA_FULL), 1u);
}

TEST_F(SignaturesTest, FullTableReturnsZeroAndCounts) {
  Make(16);  // ids 1..15
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 15; ++i) ids.push_back(Intern(Gemm(i + 1), "g"));
  for (uint32_t i = 0; i < 15; ++i) EXPECT_EQ(ids[i], i + 1);
  EXPECT_EQ(Intern(Gemm(1000), "g"), 0u);
  EXPECT_EQ(Intern(Gemm(1001), "g"), 0u);
  EXPECT_EQ(ring_->Counter(XPU_CNT_SIG_TABLE_FULL), 2u);
  EXPECT_EQ(Intern(Gemm(3), "g"), 3u);  // known ones still resolve
  EXPECT_EQ(ring_->Counter(XPU_CNT_SIG_TABLE_FULL), 2u);
}

TEST(HashSignatureTest, NameAndFieldsMatter) {
  xpu_signature_v1 s;
  memset(&s, 0, sizeof(s));
  uint64_t h1 = HashSignature(s, "abc", 3);
  EXPECT_NE(h1, 0u);
  EXPECT_NE(h1, HashSignature(s, "abd", 3));
  EXPECT_NE(h1, HashSignature(s, "abc", 2));
  s.comm_id = 1;
  EXPECT_NE(h1, HashSignature(s, "abc", 3));
  s.comm_id = 0;
  s.name_off = 1234;  // not identity
  EXPECT_EQ(h1, HashSignature(s, "abc", 3));
}

}  // namespace
}  // namespace xpu::hook
