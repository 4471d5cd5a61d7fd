// tests/fake_runtime/fake_nccl_profiler_unittest.cc — the fake libnccl drives
// a profiler plugin the way NCCL 2.28 does (fake_nccl_profiler.h), checked
// with a recording plugin (fake_nccl_profiler_test_plugin.cc): which events,
// on which thread, in which hierarchy, with which timestamps; "none" and a
// failing init switch the plugin off. Every test runs in its own process
// (gtest_discover_tests): the plugin is loaded once per process.
// Thread-safety: single-threaded test (the fake stream worker calls the
// plugin from its own thread, which is what is checked).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "fake_nccl_profiler_test_plugin.h"
#include "fake_test_util.h"
#include "nccl_profiler_api.h"

#ifndef XPU_TEST_PLUGIN_SO
#error "XPU_TEST_PLUGIN_SO must name the recording plugin"
#endif

namespace {

using xpu::fake::testing::SetEnv;

uint64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::vector<TestPluginEvent> Log() {
  void* h = dlopen(XPU_TEST_PLUGIN_SO, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return {};
  auto fn = reinterpret_cast<TestPluginLogFn>(dlsym(h, "xpu_test_plugin_log"));
  std::vector<TestPluginEvent> out(fn(nullptr, 0));
  out.resize(fn(out.data(), out.size()));
  dlclose(h);
  return out;
}

std::vector<TestPluginEvent> Starts(const std::vector<TestPluginEvent>& log, uint64_t type) {
  std::vector<TestPluginEvent> out;
  for (const auto& e : log) {
    if (e.call == TestPluginEvent::kStart && e.type == type) out.push_back(e);
  }
  return out;
}

const uint64_t kSelf = static_cast<uint64_t>(pthread_self());

ncclComm_t OneRankComm() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  EXPECT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  return c;
}

TEST(FakeNcclProfiler, DrivesThePluginLikeNccl) {
  constexpr int64_t kGpuOffset = -5'000'000'000;
  SetEnv({{"NCCL_PROFILER_PLUGIN", XPU_TEST_PLUGIN_SO},
          {"XPU_FAKE_NCCL_CHANNELS", "3"},
          {"XPU_FAKE_NCCL_PROXY_STEPS", "2"},
          {"XPU_FAKE_GPU_TIMER_OFFSET_NS", "-5000000000"}});
  ncclComm_t comm = OneRankComm();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  auto log = Log();
  ASSERT_EQ(log.size(), 1u);
  ASSERT_EQ(log[0].call, TestPluginEvent::kInit);
  EXPECT_EQ(log[0].rank, 0);
  EXPECT_EQ(log[0].nranks, 1);
  EXPECT_NE(log[0].comm_id, 0u);

  const uint64_t t0 = RealtimeNs();
  ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclFloat32, ncclSum, comm, s), ncclSuccess);
  // Launch side, synchronously on this thread: group, coll, both stopped.
  log = Log();
  auto groups = Starts(log, kNcclProfileGroup);
  auto colls = Starts(log, kNcclProfileColl);
  ASSERT_EQ(groups.size(), 1u);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].thread, kSelf);
  EXPECT_STREQ(colls[0].func, "AllReduce");
  EXPECT_STREQ(colls[0].dtype, "ncclFloat32");
  EXPECT_EQ(colls[0].count, 1024u);
  EXPECT_EQ(colls[0].nchannels, 3);
  std::set<void*> stopped_on_issue;
  for (const auto& e : log) {
    if (e.call == TestPluginEvent::kStop && e.thread == kSelf) stopped_on_issue.insert(e.handle);
  }
  EXPECT_TRUE(stopped_on_issue.count(colls[0].handle));  // "enqueued"
  EXPECT_TRUE(stopped_on_issue.count(groups[0].handle));

  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const uint64_t t1 = RealtimeNs();
  log = Log();
  // Kernel side, on the stream worker: channels and proxy work of the coll.
  auto channels = Starts(log, kNcclProfileKernelCh);
  auto proxies = Starts(log, kNcclProfileProxyOp);
  auto steps = Starts(log, kNcclProfileProxyStep);
  ASSERT_EQ(channels.size(), 3u);
  ASSERT_EQ(proxies.size(), 3u);
  ASSERT_EQ(steps.size(), 6u);
  std::map<void*, const TestPluginEvent*> by_handle;
  for (const auto& e : proxies) by_handle[e.handle] = &e;
  for (const auto& e : channels) {
    EXPECT_EQ(e.parent, colls[0].handle);
    EXPECT_NE(e.thread, kSelf);
    const uint64_t host = static_cast<uint64_t>(static_cast<int64_t>(e.ptimer) - kGpuOffset);
    EXPECT_GE(host, t0);
    EXPECT_LE(host, t1);
  }
  for (const auto& e : proxies) {
    EXPECT_EQ(e.parent, colls[0].handle);
    EXPECT_EQ(e.pid, getpid());
    EXPECT_EQ(e.count, 2u);  // nSteps
  }
  for (const auto& e : steps) EXPECT_TRUE(by_handle.count(e.parent)) << "step of unknown proxy op";
  // Every channel gets its stop timestamp (>= its start), then is stopped;
  // every started event is stopped exactly once.
  std::map<void*, int> stops;
  std::map<void*, uint64_t> stop_ptimer;
  for (const auto& e : log) {
    if (e.call == TestPluginEvent::kStop) ++stops[e.handle];
    if (e.call == TestPluginEvent::kState && e.state == kNcclKernelChStop) {
      stop_ptimer[e.handle] = e.ptimer;
    }
  }
  for (const auto& e : channels) {
    ASSERT_TRUE(stop_ptimer.count(e.handle));
    EXPECT_GE(stop_ptimer[e.handle] + 300, e.ptimer);
    EXPECT_LE(static_cast<uint64_t>(static_cast<int64_t>(stop_ptimer[e.handle]) - kGpuOffset), t1);
  }
  for (const auto& e : log) {
    if (e.call == TestPluginEvent::kStart) {
      EXPECT_EQ(stops[e.handle], 1) << e.type;
    }
  }

  // Grouped p2p: one P2p event each, launched at the group end.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(nullptr, 10, ncclBfloat16, 0, comm, s), ncclSuccess);
  ASSERT_EQ(ncclRecv(nullptr, 10, ncclBfloat16, 0, comm, s), ncclSuccess);
  EXPECT_TRUE(Starts(Log(), kNcclProfileP2p).empty());
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  auto p2p = Starts(Log(), kNcclProfileP2p);
  ASSERT_EQ(p2p.size(), 2u);
  EXPECT_STREQ(p2p[0].func, "Send");
  EXPECT_STREQ(p2p[1].func, "Recv");
  EXPECT_EQ(p2p[0].root, 0);  // peer
  EXPECT_EQ(p2p[0].count, 10u);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(Starts(Log(), kNcclProfileKernelCh).size(), 9u);  // 3 ops x 3 channels

  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  log = Log();
  ASSERT_EQ(log.back().call, TestPluginEvent::kFinalize);
  EXPECT_EQ(log.back().context, colls[0].context);
}

TEST(FakeNcclProfiler, NoneLoadsNoPlugin) {
  SetEnv({{"NCCL_PROFILER_PLUGIN", "none"}});
  ncclComm_t comm = OneRankComm();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 4, ncclFloat32, ncclSum, comm, s), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(dlopen(XPU_TEST_PLUGIN_SO, RTLD_NOW | RTLD_NOLOAD), nullptr);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(FakeNcclProfiler, FailedInitDisablesThePluginForTheComm) {
  SetEnv({{"NCCL_PROFILER_PLUGIN", XPU_TEST_PLUGIN_SO}, {"XPU_TEST_PLUGIN_FAIL_INIT", "1"}});
  ncclComm_t comm = OneRankComm();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 4, ncclFloat32, ncclSum, comm, s), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  auto log = Log();
  ASSERT_EQ(log.size(), 1u);  // init only: no events, no finalize
  EXPECT_EQ(log[0].call, TestPluginEvent::kInit);
}

}  // namespace
