// tests/fake_runtime/fake_nccl_unittest.cc — unit tests of the fake libnccl
// with several ranks as threads of one process: modelled collective time and
// start at the last arrival, slow links, grouped point-to-point, a missing
// rank blocking until abort, split, shrink, InitAll. Timing conventions:
// fake_test_util.h. Thread-safety: ranks are threads; each uses its own
// communicator handle and stream.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "fake_core.h"
#include "fake_test_util.h"

namespace {

using xpu::fake::testing::Elapsed;
using xpu::fake::testing::kSlackMs;
using xpu::fake::testing::SetEnv;

// Runs body(rank, comm, stream) on `n` threads that share one communicator,
// then destroys it (unless `destroy` is false: the body then owns teardown).
template <typename Body>
void WithRanks(int n, Body body, bool destroy = true) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm;
      ASSERT_EQ(ncclCommInitRank(&comm, n, id, r), ncclSuccess);
      cudaStream_t s;
      ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
      body(r, comm, s);
      if (destroy) {
        EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(FakeNccl, AllReduceStartsAtLastArrivalAndTakesModelledTime) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "1"}, {"RANK", nullptr}});
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  constexpr size_t kCount = 25'000'000;  // 100 MB of float
  // nccl-tests: time = size * 2(n-1)/n / busbw = 100e6 * 1 / 1e9 s = 100 ms.
  constexpr double kModelMs = 100.0;
  uint64_t before[2] = {}, after[2] = {};
  WithRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) {
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comm, &me), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(me, r);
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // late rank
    cudaEvent_t a, b;
    ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, kCount, ncclFloat32, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    before[r] = xpu::fake::EventStampNs(a);
    after[r] = xpu::fake::EventStampNs(b);
  });
  // Both ranks end no earlier than the late rank's arrival + modelled time;
  // the early rank therefore waited for the late one.
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(after[r], before[1] + static_cast<uint64_t>(kModelMs * 1e6)) << "rank " << r;
    EXPECT_LT(after[r], before[1] + static_cast<uint64_t>((kModelMs + kSlackMs) * 1e6));
  }
  // Rank 0 waited for the late rank (300 ms of the 500 ms sleep tolerate
  // scheduling delays of rank 0's first event).
  EXPECT_GE(after[0] - before[0], static_cast<uint64_t>((kModelMs + 300) * 1e6));
}

TEST(FakeNccl, SlowLinkRankSlowsItsCollectives) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "1"},
          {"RANK", nullptr},
          {"XPU_FAKE_SLOW_LINK_RANKS", "1"},
          {"XPU_FAKE_SLOW_LINK_FACTOR", "3"}});
  // Broadcast of 20 MB: factor 1 -> 20 ms, x3 on the slow link = 60 ms.
  float ms[2] = {};
  WithRanks(2, [&](int r, ncclComm_t comm, cudaStream_t s) {
    cudaEvent_t a, b;
    ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
    ASSERT_EQ(ncclBroadcast(nullptr, nullptr, 1, ncclInt8, 0, comm, s), ncclSuccess);  // align
    ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
    ASSERT_EQ(ncclBcast(nullptr, 20'000'000, ncclUint8, 0, comm, s), ncclSuccess);
    ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ms[r] = Elapsed(a, b);
  });
  for (float m : ms) {
    EXPECT_GE(m, 60.0f);
    EXPECT_LT(m, 60.0 + kSlackMs);
  }
}

TEST(FakeNccl, GroupedRingSendRecvDoesNotDeadlock) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  constexpr int kRanks = 3;
  WithRanks(kRanks, [&](int r, ncclComm_t comm, cudaStream_t s) {
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(nullptr, 1024, ncclFloat, (r + 1) % kRanks, comm, s), ncclSuccess);
      ASSERT_EQ(ncclRecv(nullptr, 1024, ncclFloat, (r + kRanks - 1) % kRanks, comm, s),
                ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    }
    ASSERT_EQ(ncclAllGather(nullptr, nullptr, 1024, ncclFloat, comm, s), ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(nullptr, nullptr, 1024, ncclFloat, ncclSum, comm, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(ncclSend(nullptr, 1, ncclFloat, kRanks, comm, s), ncclInvalidArgument);
  });
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

TEST(FakeNccl, MissingRankBlocksUntilAbort) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(
      2,
      [&](int r, ncclComm_t comm, cudaStream_t s) {
        if (r == 1) {  // never calls the collective
          EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
          return;
        }
        ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, comm, s), ncclSuccess);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // blocked inside the "kernel"
        ncclResult_t async = ncclSuccess;
        ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
        EXPECT_EQ(async, ncclSuccess);
        // Abort releases the blocked op; the handle is dead afterwards.
        ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
        EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);
      },
      /*destroy=*/false);
}

TEST(FakeNccl, SplitByColor) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(4, [&](int r, ncclComm_t comm, cudaStream_t s) {
    ncclComm_t sub = nullptr;
    // Keys reverse the order inside each color.
    ASSERT_EQ(ncclCommSplit(comm, r % 2, -r, &sub, nullptr), ncclSuccess);
    ASSERT_NE(sub, nullptr);
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(me, r < 2 ? 1 : 0);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, sub, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ncclComm_t none = reinterpret_cast<ncclComm_t>(0x1);
    ASSERT_EQ(ncclCommSplit(comm, r == 0 ? 0 : NCCL_SPLIT_NOCOLOR, 0, &none, nullptr), ncclSuccess);
    EXPECT_EQ(none == nullptr, r != 0);
    if (none != nullptr) {
      EXPECT_EQ(ncclCommDestroy(none), ncclSuccess);
    }
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(FakeNccl, ShrinkExcludesRanksWithoutThem) {
  SetEnv({{"XPU_FAKE_NET_GBPS", "100"}, {"RANK", nullptr}});
  WithRanks(4, [&](int r, ncclComm_t comm, cudaStream_t s) {
    if (r == 1) return;  // the excluded rank never calls shrink
    int exclude[] = {1};
    ncclComm_t sub = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &sub, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess);
    int n = 0, me = -1;
    EXPECT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(sub, &me), ncclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(me, r == 0 ? 0 : r - 1);
    ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat, ncclSum, sub, s), ncclSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST(FakeNccl, InitAllCreatesOneCommPerDevice) {
  SetEnv({{"XPU_FAKE_DEVICES", "2"}, {"RANK", nullptr}});
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess);
  for (int i = 0; i < 2; ++i) {
    int dev = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[i], &dev), ncclSuccess);
    EXPECT_EQ(dev, i);
    EXPECT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
  }
}

}  // namespace
