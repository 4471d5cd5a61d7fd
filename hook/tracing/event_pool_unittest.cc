// hook/tracing/event_pool_unittest.cc — per-device event pools on fake CUDA
// events: request on first sight, creation by the (test-played) background
// thread, chunked growth, take/give accounting. Thread-safety: single-threaded
// except the take/give stress test.
#include "hook/tracing/event_pool.h"

#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "hook/tracing/fake_cuda_for_test.h"

namespace xpu::hook {
namespace {

using namespace xpu::hook::testing;  // NOLINT

class EventPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InstallFakeCuda(&api_);
    clock_.Init(&api_, 5000000000ull);
  }
  // Takes every event of a kind on `dev`; returns the handles.
  std::vector<uint32_t> Exhaust(EventPool& pool, int dev, bool timing) {
    std::vector<uint32_t> out;
    for (uint32_t h; (h = pool.Take(dev, timing)) != 0;) out.push_back(h);
    return out;
  }
  CudaApi api_;
  GpuClock clock_;
};

TEST_F(EventPoolTest, FirstSightRequestsThenBackgroundCreates) {
  EventPool pool;
  pool.Init(&api_, 100);
  EXPECT_EQ(pool.Take(3, true), 0u);
  EXPECT_EQ(pool.state(3), EventPool::kRequested);
  EXPECT_TRUE(pool.HasRequests());
  EXPECT_EQ(pool.Take(3, false), 0u);  // still not ready, asked once
  EXPECT_EQ(pool.ServiceRequests(&clock_), 1);
  EXPECT_EQ(pool.state(3), EventPool::kReady);
  EXPECT_TRUE(clock_.Calibrated(3));
  EXPECT_FALSE(pool.HasRequests());
  EXPECT_EQ(pool.state(2), EventPool::kNone);  // other devices untouched
  EXPECT_EQ(pool.Take(-1, true), 0u);
  EXPECT_EQ(pool.Take(kMaxDevices, true), 0u);

  auto timing = Exhaust(pool, 3, true);
  auto plain = Exhaust(pool, 3, false);
  ASSERT_EQ(timing.size(), 100u);
  ASSERT_EQ(plain.size(), 100u);
  std::set<cudaEvent_t> distinct;
  for (uint32_t h : timing) {
    EXPECT_EQ(EventPool::DeviceOf(h), 3);
    EXPECT_EQ(AsFake(pool.Get(h))->flags & cudaEventDisableTiming, 0u);
    distinct.insert(pool.Get(h));
  }
  for (uint32_t h : plain) {
    EXPECT_NE(AsFake(pool.Get(h))->flags & cudaEventDisableTiming, 0u);
    distinct.insert(pool.Get(h));
  }
  EXPECT_EQ(distinct.size(), 200u);
  pool.Give(timing[7]);
  EXPECT_EQ(pool.Take(3, true), timing[7]);
  EXPECT_EQ(pool.Take(3, true), 0u);
}

TEST_F(EventPoolTest, OpensAfterFirstChunkAndGrows) {
  EventPool pool;
  pool.Init(&api_, 600);
  pool.Take(0, true);
  pool.ServiceRequests(&clock_);
  ASSERT_EQ(pool.state(0), EventPool::kReady);
  EXPECT_TRUE(pool.HasRequests());  // not full yet
  auto first = Exhaust(pool, 0, true);
  EXPECT_EQ(first.size(), EventPool::kChunk);
  for (uint32_t h : first) pool.Give(h);
  pool.ServiceRequests(&clock_);
  pool.ServiceRequests(&clock_);
  EXPECT_FALSE(pool.HasRequests());
  EXPECT_EQ(Exhaust(pool, 0, true).size(), 600u);
  EXPECT_EQ(Exhaust(pool, 0, false).size(), 600u);
}

TEST_F(EventPoolTest, ConcurrentTakeGiveNeverDuplicates) {
  EventPool pool;
  pool.Init(&api_, 64);
  pool.Take(1, true);
  pool.ServiceRequests(&clock_);
  std::atomic<int> in_use[64] = {};
  std::atomic<int> dup{0};
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t) {
    th.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        uint32_t h = pool.Take(1, true);
        if (h == 0) continue;
        uint32_t idx = (h - 1) & 0xffff;
        if (in_use[idx].fetch_add(1) != 0) dup.fetch_add(1);
        in_use[idx].fetch_sub(1);
        pool.Give(h);
      }
    });
  }
  for (auto& x : th) x.join();
  EXPECT_EQ(dup.load(), 0);
  EXPECT_EQ(Exhaust(pool, 1, true).size(), 64u);  // nothing lost
}

}  // namespace
}  // namespace xpu::hook
