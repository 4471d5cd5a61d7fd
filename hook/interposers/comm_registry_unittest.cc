// hook/interposers/comm_registry_unittest.cc — communicator identity and
// sequence numbering (hook/comm_registry.h). Thread-safety: the concurrency
// test drives the registry from several threads; everything else is
// single-threaded.
#include "hook/interposers/comm_registry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace xpu::hook {
namespace {

struct UniqueId {
  unsigned char bytes[128];
};

UniqueId MakeId(unsigned char seed) {
  UniqueId id;
  for (int i = 0; i < 128; ++i) id.bytes[i] = static_cast<unsigned char>(seed * 31 + i);
  return id;
}

const void* Handle(uintptr_t v) { return reinterpret_cast<const void*>(v); }

TEST(CommIdTest, EqualUniqueIdsGiveEqualIds) {
  const UniqueId a = MakeId(1), b = MakeId(1);
  EXPECT_EQ(CommIdFromUniqueId(&a, sizeof(a)), CommIdFromUniqueId(&b, sizeof(b)));
  EXPECT_NE(CommIdFromUniqueId(&a, sizeof(a)), 0u);
}

TEST(CommIdTest, DifferentUniqueIdsGiveDifferentIds) {
  UniqueId a = MakeId(1), b = MakeId(1);
  b.bytes[127] ^= 1;  // one bit in the last byte
  EXPECT_NE(CommIdFromUniqueId(&a, sizeof(a)), CommIdFromUniqueId(&b, sizeof(b)));
  std::set<uint64_t> ids;
  for (int s = 0; s < 200; ++s) {
    const UniqueId id = MakeId(static_cast<unsigned char>(s));
    ids.insert(CommIdFromUniqueId(&id, sizeof(id)));
  }
  EXPECT_EQ(ids.size(), 200u);
}

TEST(CommIdTest, SplitIdsAreDeterministicAndDistinguishColorAndOrdinal) {
  EXPECT_EQ(CommIdFromSplit(42, 3, 1), CommIdFromSplit(42, 3, 1));
  EXPECT_NE(CommIdFromSplit(42, 3, 1), CommIdFromSplit(42, 4, 1));
  EXPECT_NE(CommIdFromSplit(42, 3, 1), CommIdFromSplit(42, 3, 2));
  EXPECT_NE(CommIdFromSplit(42, 3, 1), CommIdFromSplit(43, 3, 1));
  EXPECT_NE(CommIdFromSplit(42, 3, 1), CommIdFromShrink(42, 1));
  EXPECT_NE(CommIdFromSplit(42, 0, 1), 0u);
}

TEST(CommIdTest, InitAllDependsOnDevicesAndProcess) {
  const int devs[] = {0, 1, 2, 3};
  const int other[] = {0, 1, 2, 4};
  EXPECT_EQ(CommIdFromInitAll(devs, 4, 100), CommIdFromInitAll(devs, 4, 100));
  EXPECT_NE(CommIdFromInitAll(devs, 4, 100), CommIdFromInitAll(devs, 4, 101));
  EXPECT_NE(CommIdFromInitAll(devs, 4, 100), CommIdFromInitAll(other, 4, 100));
  EXPECT_NE(CommIdFromInitAll(devs, 4, 100), CommIdFromInitAll(devs, 3, 100));
  EXPECT_NE(CommIdFromInitAll(nullptr, 4, 100), 0u);
}

TEST(CommRegistryTest, RegisterFindAndRetire) {
  CommRegistry reg;
  CommInfo* info = reg.Register(Handle(0x1000), 77, 2, 8, 1);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(reg.Find(Handle(0x1000)), info);
  EXPECT_EQ(info->comm_id, 77u);
  EXPECT_EQ(info->rank.load(), 2);
  EXPECT_EQ(info->nranks.load(), 8);
  EXPECT_EQ(info->device.load(), 1);
  EXPECT_EQ(reg.Id(Handle(0x1000)), 77u);
  EXPECT_EQ(reg.Find(Handle(0x2000)), nullptr);
  EXPECT_EQ(reg.Id(Handle(0x2000)), 0u);
  reg.Retire(Handle(0x1000));
  EXPECT_EQ(reg.Find(Handle(0x1000)), nullptr);
  EXPECT_EQ(reg.Id(Handle(0x1000)), 0u);
  EXPECT_EQ(reg.Register(nullptr, 1, 0, 1, 0), nullptr);
}

TEST(CommRegistryTest, ReusedHandleGetsFreshState) {
  CommRegistry reg;
  CommInfo* first = reg.Register(Handle(0x1000), 1, 0, 2, 0);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(first), 1u);
  reg.Retire(Handle(0x1000));
  CommInfo* second = reg.Register(Handle(0x1000), 2, 1, 4, 0);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_EQ(reg.Find(Handle(0x1000)), second);
  EXPECT_EQ(reg.Id(Handle(0x1000)), 2u);
  EXPECT_EQ(reg.LastSeq(Handle(0x1000)), 0u);
  // Registering a live handle again replaces it, too.
  CommInfo* third = reg.Register(Handle(0x1000), 3, 1, 4, 0);
  EXPECT_EQ(reg.Find(Handle(0x1000)), third);
  EXPECT_TRUE(second->retired.load());
}

TEST(CommRegistryTest, CollisionsAndRetiredSlotsKeepOtherEntriesReachable) {
  CommRegistry reg;
  // Many handles, so that probe chains overlap; retire every other one.
  for (uintptr_t i = 1; i <= 2000; ++i)
    ASSERT_NE(reg.Register(Handle(i * 64), i, 0, 1, 0), nullptr);
  for (uintptr_t i = 1; i <= 2000; i += 2) reg.Retire(Handle(i * 64));
  for (uintptr_t i = 1; i <= 2000; ++i) {
    EXPECT_EQ(reg.Id(Handle(i * 64)), (i % 2) ? 0u : i) << i;
  }
  // Retired slots are reused, so the table does not fill up over time.
  for (uintptr_t i = 3000; i < 7000; ++i) {
    ASSERT_NE(reg.Register(Handle(i * 64), i, 0, 1, 0), nullptr) << i;
    reg.Retire(Handle(i * 64));
  }
  for (uintptr_t i = 2; i <= 2000; i += 2) EXPECT_EQ(reg.Id(Handle(i * 64)), i);
}

TEST(CommRegistryTest, CollectiveSeqIsOneBasedAndPerComm) {
  CommRegistry reg;
  CommInfo* a = reg.Register(Handle(0x10), 1, 0, 2, 0);
  CommInfo* b = reg.Register(Handle(0x20), 2, 0, 2, 0);
  EXPECT_EQ(reg.LastSeq(Handle(0x10)), 0u);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(a), 1u);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(a), 2u);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(b), 1u);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(a), 3u);
  EXPECT_EQ(reg.LastSeq(Handle(0x10)), 3u);
  EXPECT_EQ(reg.LastSeq(Handle(0x20)), 1u);
  EXPECT_EQ(CommRegistry::NextCollectiveSeq(nullptr), 0u);
}

TEST(CommRegistryTest, P2pSeqIsPerPeerAndDirection) {
  CommRegistry reg;
  CommInfo* c = reg.Register(Handle(0x10), 1, 0, 4, 0);
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 1, true), 1u);
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 1, true), 2u);
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 2, true), 1u);
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 1, false), 1u);  // receives count apart
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 1, true), 3u);
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, 4, true), 0u);  // out of range
  EXPECT_EQ(CommRegistry::NextP2pSeq(c, -1, false), 0u);
  EXPECT_EQ(CommRegistry::NextP2pSeq(nullptr, 0, true), 0u);
  // p2p does not move the collective counter.
  EXPECT_EQ(reg.LastSeq(Handle(0x10)), 0u);
}

TEST(CommRegistryTest, SendAndMatchingRecvAgreeAcrossRanks) {
  // Two ranks of one communicator, each with its own registry (its own
  // process): rank 0 sends to 1 three times, rank 1 receives from 0 three
  // times, interleaved with traffic to other peers.
  CommRegistry r0, r1;
  CommInfo* c0 = r0.Register(Handle(0x10), 9, 0, 3, 0);
  CommInfo* c1 = r1.Register(Handle(0x99), 9, 1, 3, 0);
  std::vector<uint32_t> sent, received;
  for (int i = 0; i < 3; ++i) {
    sent.push_back(CommRegistry::NextP2pSeq(c0, 1, true));
    CommRegistry::NextP2pSeq(c0, 2, true);
    CommRegistry::NextP2pSeq(c1, 2, false);
    received.push_back(CommRegistry::NextP2pSeq(c1, 0, false));
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent, (std::vector<uint32_t>{1, 2, 3}));
}

TEST(CommRegistryTest, SplitOrdinalCountsPerParent) {
  CommRegistry reg;
  CommInfo* p = reg.Register(Handle(0x10), 1, 0, 2, 0);
  CommInfo* q = reg.Register(Handle(0x20), 2, 0, 2, 0);
  EXPECT_EQ(CommRegistry::NextSplitOrdinal(p), 1u);
  EXPECT_EQ(CommRegistry::NextSplitOrdinal(p), 2u);
  EXPECT_EQ(CommRegistry::NextSplitOrdinal(q), 1u);
  EXPECT_EQ(CommRegistry::NextSplitOrdinal(nullptr), 0u);
}

TEST(CommRegistryTest, ConcurrentSeqsAreUnique) {
  CommRegistry reg;
  CommInfo* c = reg.Register(Handle(0x10), 1, 0, 2, 0);
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::vector<uint32_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        got[t].push_back(CommRegistry::NextCollectiveSeq(c));
        // Readers race with writers: must stay consistent.
        EXPECT_EQ(reg.Id(Handle(0x10)), 1u);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<uint32_t> all;
  for (const auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), static_cast<uint32_t>(kThreads * kPerThread));
  EXPECT_EQ(reg.LastSeq(Handle(0x10)), static_cast<uint32_t>(kThreads * kPerThread));
}

TEST(CommRegistryTest, GlobalAccessorsUseTheProcessRegistry) {
  CommInfo* info = CommRegistry::Get().Register(Handle(0xabc0), 555, 0, 2, 0);
  ASSERT_NE(info, nullptr);
  CommRegistry::NextCollectiveSeq(info);
  EXPECT_EQ(CommId(Handle(0xabc0)), 555u);
  EXPECT_EQ(CommLastSeq(Handle(0xabc0)), 1u);
  CommRegistry::Get().Retire(Handle(0xabc0));
  EXPECT_EQ(CommId(Handle(0xabc0)), 0u);
}

}  // namespace
}  // namespace xpu::hook
