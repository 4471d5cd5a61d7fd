// hook/nccl_profiler/profiler_core_unittest.cc — the plugin's logic against
// a recording fake of the hook's C API: descriptor handling, the join query,
// completion in any event order, clock mapping, pools, foreign handles.
// Thread-safety: the fake API is guarded by a mutex (one test uses threads).
#include "profiler_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace xpu::nccl_profiler {
namespace {

// ---- fake hook API ---------------------------------------------------------------

struct FakeHook {
  std::mutex mu;
  int attach_result = 1;
  std::deque<xpu_nccl_issued_op_v1> answers;  // claimed in order
  int matches_per_answer = 1;
  std::vector<xpu_nccl_issue_query_v1> queries;
  std::vector<xpu_record_v1> records;
  std::atomic<uint64_t> now{1'000'000'000};
};
FakeHook* g_hook = nullptr;

int FakeAttach(uint32_t v) { return v == XPU_NCCL_PLUGIN_API_VERSION ? g_hook->attach_result : 0; }
int FakeClaim(const xpu_nccl_issue_query_v1* q, xpu_nccl_issued_op_v1* out) {
  std::lock_guard<std::mutex> l(g_hook->mu);
  g_hook->queries.push_back(*q);
  if (g_hook->answers.empty()) return 0;
  *out = g_hook->answers.front();
  g_hook->answers.pop_front();
  return g_hook->matches_per_answer;
}
int FakeEmit(const xpu_record_v1* r) {
  std::lock_guard<std::mutex> l(g_hook->mu);
  g_hook->records.push_back(*r);
  return 0;
}
uint64_t FakeNow() { return g_hook->now.load(); }

HookApi FakeApi() {
  HookApi api;
  api.attach = &FakeAttach;
  api.claim = &FakeClaim;
  api.emit = &FakeEmit;
  api.now_ns = &FakeNow;
  return api;
}

xpu_nccl_event_descr_v5_t Coll(const char* func, size_t count, const char* dt, int root,
                               uint8_t nch) {
  xpu_nccl_event_descr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = kNcclProfileColl;
  d.coll.func = func;
  d.coll.count = count;
  d.coll.datatype = dt;
  d.coll.root = root;
  d.coll.nChannels = nch;
  return d;
}
xpu_nccl_event_descr_v5_t P2p(const char* func, size_t count, const char* dt, int peer,
                              uint8_t nch) {
  xpu_nccl_event_descr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = kNcclProfileP2p;
  d.p2p.func = func;
  d.p2p.count = count;
  d.p2p.datatype = dt;
  d.p2p.peer = peer;
  d.p2p.nChannels = nch;
  return d;
}
xpu_nccl_event_descr_v5_t Child(uint64_t type, void* parent) {
  xpu_nccl_event_descr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  if (type == kNcclProfileProxyOp) d.proxyOp.pid = getpid();
  return d;
}
xpu_nccl_issued_op_v1 Issued(uint32_t sig, uint32_t seq, uint64_t comm, uint64_t launch,
                             uint16_t stream) {
  xpu_nccl_issued_op_v1 o{};
  o.sig_id = sig;
  o.seq = seq;
  o.comm_id = comm;
  o.launch_ns = launch;
  o.stream = stream;
  return o;
}

class ProfilerCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { g_hook = &hook_; }
  void TearDown() override { g_hook = nullptr; }

  // Starts a kernel channel of `op` at GPU time `ptimer`, observed on the
  // host at `host`.
  void* StartChannel(Profiler& p, void* op, uint8_t ch, uint64_t ptimer, uint64_t host) {
    hook_.now = host;
    xpu_nccl_event_descr_v5_t d = Child(kNcclProfileKernelCh, op);
    d.kernelCh.channelId = ch;
    d.kernelCh.pTimer = ptimer;
    void* h = nullptr;
    EXPECT_EQ(p.StartEvent(ctx_, &h, &d), ncclSuccess);
    EXPECT_NE(h, nullptr);
    return h;
  }
  void StopChannel(Profiler& p, void* ch, uint64_t ptimer, uint64_t host) {
    hook_.now = host;
    xpu_nccl_state_args_v5_t a;
    memset(&a, 0, sizeof(a));
    a.kernelCh.pTimer = ptimer;
    EXPECT_EQ(p.RecordEventState(ch, kNcclKernelChStop, &a), ncclSuccess);
    EXPECT_EQ(p.StopEvent(ch), ncclSuccess);
  }
  void* StartOp(Profiler& p, xpu_nccl_event_descr_v5_t d) {
    void* h = nullptr;
    EXPECT_EQ(p.StartEvent(ctx_, &h, &d), ncclSuccess);
    return h;
  }

  FakeHook hook_;
  void* ctx_ = nullptr;
};

TEST_F(ProfilerCoreTest, InitFailsWithoutHookAndEventsAreHarmless) {
  Profiler p(HookApi{});  // nothing resolved: no libxpu_hook.so
  int mask = 0;
  EXPECT_NE(p.Init(&ctx_, 42, &mask, 4, 0), ncclSuccess);
  EXPECT_EQ(ctx_, nullptr);
  void* h = reinterpret_cast<void*>(0x1);
  xpu_nccl_event_descr_v5_t d = Coll("AllReduce", 16, "ncclFloat32", 0, 1);
  EXPECT_EQ(p.StartEvent(nullptr, &h, &d), ncclSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(p.StopEvent(nullptr), ncclSuccess);
  EXPECT_EQ(p.Finalize(nullptr), ncclSuccess);
}

TEST_F(ProfilerCoreTest, InitFailsWhenHookDeclines) {
  hook_.attach_result = 0;  // XPU_TIMING=all/off, or tracing disabled
  Profiler p(FakeApi());
  int mask = 0;
  EXPECT_NE(p.Init(&ctx_, 42, &mask, 4, 0), ncclSuccess);
  EXPECT_EQ(ctx_, nullptr);
}

TEST_F(ProfilerCoreTest, InitRequestsTheEventsItUses) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 4, 1), ncclSuccess);
  ASSERT_NE(ctx_, nullptr);
  EXPECT_TRUE(mask & kNcclProfileColl);
  EXPECT_TRUE(mask & kNcclProfileP2p);
  EXPECT_TRUE(mask & kNcclProfileKernelCh);
  EXPECT_TRUE(mask & kNcclProfileProxyStep);
  EXPECT_FALSE(mask & kNcclProfileProxyCtrl);
}

TEST_F(ProfilerCoreTest, DescriptorStrings) {
  EXPECT_EQ(Profiler::KindFromFunc("AllReduce"), XPU_OP_ALLREDUCE);
  EXPECT_EQ(Profiler::KindFromFunc("ReduceScatter"), XPU_OP_REDUCESCATTER);
  EXPECT_EQ(Profiler::KindFromFunc("Reduce"), XPU_OP_REDUCE);
  EXPECT_EQ(Profiler::KindFromFunc("Recv"), XPU_OP_RECV);
  EXPECT_EQ(Profiler::KindFromFunc("SendRecv"), XPU_OP_NONE);
  EXPECT_EQ(Profiler::KindFromFunc(nullptr), XPU_OP_NONE);
  EXPECT_EQ(Profiler::DtypeSizeFromName("ncclBfloat16"), 2u);
  EXPECT_EQ(Profiler::DtypeSizeFromName("ncclFloat64"), 8u);
  EXPECT_EQ(Profiler::DtypeSizeFromName("ncclInt8"), 1u);
  EXPECT_EQ(Profiler::DtypeSizeFromName("Float32"), 4u);
  EXPECT_EQ(Profiler::DtypeSizeFromName("ncclNope"), 0u);
  EXPECT_EQ(Profiler::DtypeSizeFromName(nullptr), 0u);
}

// The whole life of one collective: join, channels on another "thread", the
// op's own stop before the kernel ran, clock mapping, one record.
TEST_F(ProfilerCoreTest, CollectiveJoinedTimedAndWrittenOnce) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 4, 1), ncclSuccess);
  const uint64_t kOff = 1'000'000'000'000ull;  // host = gpu + kOff
  const uint64_t g0 = 5'000'000'000ull;
  const uint64_t launch = g0 + kOff - 20'000;
  hook_.answers.push_back(Issued(7, 3, 0xabc, launch, 5));

  void* op = StartOp(p, Coll("AllReduce", 4096, "ncclBfloat16", 0, 2));
  ASSERT_NE(op, nullptr);
  ASSERT_EQ(hook_.queries.size(), 1u);
  const xpu_nccl_issue_query_v1& q = hook_.queries[0];
  EXPECT_EQ(q.kind, XPU_OP_ALLREDUCE);
  EXPECT_EQ(q.bytes, 8192u);
  EXPECT_EQ(q.peer, -1);  // root is not compared for AllReduce
  EXPECT_EQ(q.rank, 1);
  EXPECT_EQ(q.nranks, 4);
  EXPECT_EQ(q.comm_id, 0u);

  EXPECT_EQ(p.StopEvent(op), ncclSuccess);  // "enqueued": kernel not run yet
  void* c0 = StartChannel(p, op, 0, g0 + 100, g0 + 100 + kOff + 700);
  void* c1 = StartChannel(p, op, 1, g0 + 150, g0 + 150 + kOff + 200);
  StopChannel(p, c1, g0 + 5000, g0 + 5000 + kOff + 900);
  EXPECT_TRUE(hook_.records.empty());  // one channel still running
  StopChannel(p, c0, g0 + 5100, g0 + 5100 + kOff + 50);

  ASSERT_EQ(hook_.records.size(), 1u);
  const xpu_record_v1& r = hook_.records[0];
  EXPECT_EQ(r.sig_id, 7u);
  EXPECT_EQ(r.seq, 3u);
  EXPECT_EQ(r.stream, 5);
  EXPECT_EQ(r.flags, XPU_REC_PLUGIN | XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID);
  EXPECT_EQ(r.duration, 5000u);  // [min start, max stop] in GPU time
  // Offset = smallest host - gpu seen = kOff + 50.
  EXPECT_EQ(r.start_ns, g0 + 100 + kOff + 50);
  EXPECT_EQ(r.issue_latency_ns, static_cast<int32_t>(r.start_ns - launch));
  EXPECT_EQ(p.LiveOps(), 0u);
  EXPECT_EQ(p.stats().records_written.load(), 1u);
  EXPECT_EQ(p.stats().kernel_channels.load(), 2u);
}

TEST_F(ProfilerCoreTest, ChannelsBeforeOwnStopAlsoComplete) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  hook_.answers.push_back(Issued(9, 1, 0, 10, 0));
  void* op = StartOp(p, P2p("Send", 100, "ncclInt8", 1, 1));
  ASSERT_EQ(hook_.queries.size(), 1u);
  EXPECT_EQ(hook_.queries[0].kind, XPU_OP_SEND);
  EXPECT_EQ(hook_.queries[0].peer, 1);
  EXPECT_EQ(hook_.queries[0].bytes, 100u);
  void* c = StartChannel(p, op, 0, 1000, 2000);
  StopChannel(p, c, 4000, 5000);
  EXPECT_TRUE(hook_.records.empty());  // NCCL's stopEvent of the op not seen yet
  EXPECT_EQ(p.StopEvent(op), ncclSuccess);
  ASSERT_EQ(hook_.records.size(), 1u);
  EXPECT_EQ(hook_.records[0].duration, 3000u);
  EXPECT_EQ(hook_.records[0].start_ns, 2000u);  // offset 1000
}

TEST_F(ProfilerCoreTest, RootedCollectivePassesRootAndCommIsLearned) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 8, 3), ncclSuccess);
  hook_.answers.push_back(Issued(1, 1, 0x77, 1, 0));
  hook_.answers.push_back(Issued(1, 2, 0x77, 1, 0));
  void* a = StartOp(p, Coll("Broadcast", 10, "ncclFloat32", 6, 1));
  void* b = StartOp(p, Coll("Broadcast", 10, "ncclFloat32", 6, 1));
  ASSERT_EQ(hook_.queries.size(), 2u);
  EXPECT_EQ(hook_.queries[0].peer, 6);
  EXPECT_EQ(hook_.queries[0].bytes, 40u);
  EXPECT_EQ(hook_.queries[0].comm_id, 0u);
  EXPECT_EQ(hook_.queries[1].comm_id, 0x77u);  // bound after an unambiguous join
  p.StopEvent(a);
  p.StopEvent(b);
}

TEST_F(ProfilerCoreTest, UnjoinedOpWritesNothingAndFreesItsSlot) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  void* op = StartOp(p, Coll("AllGather", 8, "ncclFloat16", 0, 1));  // no answer queued
  ASSERT_NE(op, nullptr);
  void* c = StartChannel(p, op, 0, 10, 20);
  StopChannel(p, c, 30, 40);
  p.StopEvent(op);
  EXPECT_TRUE(hook_.records.empty());
  EXPECT_EQ(p.stats().ops_unjoined.load(), 1u);
  EXPECT_EQ(p.LiveOps(), 0u);
}

TEST_F(ProfilerCoreTest, ProxyOpKeepsTheOpOpenAndStepsAreSummed) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  hook_.answers.push_back(Issued(4, 8, 0, 1, 0));
  void* op = StartOp(p, Coll("ReduceScatter", 256, "ncclFloat32", 0, 1));
  void* c = StartChannel(p, op, 0, 100, 200);
  void* proxy = nullptr;
  xpu_nccl_event_descr_v5_t pd = Child(kNcclProfileProxyOp, op);
  ASSERT_EQ(p.StartEvent(ctx_, &proxy, &pd), ncclSuccess);
  ASSERT_NE(proxy, nullptr);
  for (int s = 0; s < 3; ++s) {
    void* step = nullptr;
    xpu_nccl_event_descr_v5_t sd = Child(kNcclProfileProxyStep, proxy);
    sd.proxyStep.step = s;
    ASSERT_EQ(p.StartEvent(ctx_, &step, &sd), ncclSuccess);
    xpu_nccl_state_args_v5_t a;
    memset(&a, 0, sizeof(a));
    a.proxyStep.transSize = 1000;
    p.RecordEventState(step, kNcclProxyStepSendGPUWait, &a);
    p.RecordEventState(step, kNcclProxyStepSendWait, &a);
    p.StopEvent(step);
  }
  StopChannel(p, c, 600, 700);
  p.StopEvent(op);
  EXPECT_TRUE(hook_.records.empty());  // the proxy is still working on it
  p.StopEvent(proxy);
  ASSERT_EQ(hook_.records.size(), 1u);
  EXPECT_EQ(hook_.records[0].duration, 500u);
  EXPECT_EQ(p.stats().proxy_steps.load(), 3u);
  EXPECT_EQ(p.stats().net_bytes.load(), 3000u);
}

TEST_F(ProfilerCoreTest, ProxyStepsTimeAnOpWithoutKernelChannels) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  hook_.answers.push_back(Issued(4, 8, 0, 1000, 0));
  void* op = StartOp(p, Coll("AllReduce", 256, "ncclFloat32", 0, 0));  // no channel events
  void* proxy = nullptr;
  xpu_nccl_event_descr_v5_t pd = Child(kNcclProfileProxyOp, op);
  p.StartEvent(ctx_, &proxy, &pd);
  void* step = nullptr;
  xpu_nccl_event_descr_v5_t sd = Child(kNcclProfileProxyStep, proxy);
  hook_.now = 5000;
  p.StartEvent(ctx_, &step, &sd);
  hook_.now = 8000;
  p.StopEvent(step);
  p.StopEvent(op);
  p.StopEvent(proxy);
  ASSERT_EQ(hook_.records.size(), 1u);
  EXPECT_EQ(hook_.records[0].start_ns, 5000u);
  EXPECT_EQ(hook_.records[0].duration, 3000u);
  EXPECT_EQ(hook_.records[0].issue_latency_ns, 4000);
}

TEST_F(ProfilerCoreTest, PoolExhaustionIsCountedAndRecovers) {
  Profiler p(FakeApi(), /*max_ops=*/2, /*max_children=*/2);
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  void* a = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  void* b = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  void* c = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  EXPECT_NE(a, nullptr);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(p.stats().pool_exhausted.load(), 1u);
  EXPECT_EQ(p.StopEvent(c), ncclSuccess);  // NCCL passes our null back: fine
  for (void* op : {a, b}) {
    void* ch = StartChannel(p, op, 0, 1, 2);
    StopChannel(p, ch, 3, 4);
    p.StopEvent(op);
  }
  EXPECT_EQ(p.LiveOps(), 0u);
  EXPECT_NE(StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1)), nullptr);
}

TEST_F(ProfilerCoreTest, ForeignAndLateHandlesAreIgnored) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  int not_ours = 0;
  EXPECT_EQ(p.StopEvent(&not_ours), ncclSuccess);
  xpu_nccl_state_args_v5_t a;
  memset(&a, 0, sizeof(a));
  EXPECT_EQ(p.RecordEventState(&not_ours, kNcclKernelChStop, &a), ncclSuccess);
  EXPECT_EQ(p.stats().foreign_handles.load(), 1u);
  // A channel whose parent is not one of our ops: orphan, still stoppable.
  void* ch = StartChannel(p, &not_ours, 0, 1, 2);
  StopChannel(p, ch, 3, 4);
  EXPECT_EQ(p.stats().children_orphaned.load(), 1u);
  // A proxy op that starts after its op completed: late, no effect.
  hook_.answers.push_back(Issued(2, 1, 0, 1, 0));
  void* op = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  void* c = StartChannel(p, op, 0, 10, 20);
  StopChannel(p, c, 30, 40);
  p.StopEvent(op);
  ASSERT_EQ(hook_.records.size(), 1u);
  void* proxy = nullptr;
  xpu_nccl_event_descr_v5_t pd = Child(kNcclProfileProxyOp, op);
  p.StartEvent(ctx_, &proxy, &pd);
  p.StopEvent(proxy);
  EXPECT_EQ(hook_.records.size(), 1u);
  EXPECT_GE(p.stats().children_late.load(), 1u);
  // A proxy op of another process (PXN) never dereferences its parent.
  xpu_nccl_event_descr_v5_t remote = Child(kNcclProfileProxyOp, &not_ours);
  remote.proxyOp.pid = getpid() + 1;
  void* rh = nullptr;
  p.StartEvent(ctx_, &rh, &remote);
  p.StopEvent(rh);
  EXPECT_EQ(p.stats().children_orphaned.load(), 2u);
}

// An op that never gets its channel stops (e.g. a graph-captured launch)
// gives its slot up once it has been stopped for kStaleNs and the slot is
// needed; its late channel cannot touch the new op.
TEST_F(ProfilerCoreTest, StaleOpIsReclaimedWithoutRecord) {
  Profiler p(FakeApi(), /*max_ops=*/1, /*max_children=*/4);
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  hook_.answers.push_back(Issued(2, 1, 0, 1, 0));
  hook_.now = 1'000;
  void* old_op = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  ASSERT_NE(old_op, nullptr);
  void* old_ch = StartChannel(p, old_op, 0, 10, 1'000);
  hook_.now = 2'000;
  p.StopEvent(old_op);
  hook_.now = 2'000 + Profiler::kStaleNs / 2;
  EXPECT_EQ(StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1)), nullptr);  // not stale yet
  hook_.answers.clear();
  hook_.answers.push_back(Issued(2, 3, 0, 1, 0));
  hook_.now = 2'000 + Profiler::kStaleNs + 1;
  void* op = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  ASSERT_EQ(op, old_op);  // the same slot, a new generation
  EXPECT_EQ(p.stats().ops_stale.load(), 1u);
  StopChannel(p, old_ch, 20, hook_.now);  // late: ignored
  EXPECT_TRUE(hook_.records.empty());
  void* ch = StartChannel(p, op, 0, 100, hook_.now);
  StopChannel(p, ch, 400, hook_.now + 300);
  p.StopEvent(op);
  ASSERT_EQ(hook_.records.size(), 1u);
  EXPECT_EQ(hook_.records[0].seq, 3u);
  EXPECT_EQ(hook_.records[0].duration, 300u);
}

TEST_F(ProfilerCoreTest, LongDurationsUseMicroseconds) {
  Profiler p(FakeApi());
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  hook_.answers.push_back(Issued(2, 1, 0, 1, 0));
  void* op = StartOp(p, Coll("AllReduce", 1, "ncclInt8", 0, 1));
  void* c = StartChannel(p, op, 0, 1000, 1000);
  StopChannel(p, c, 1000 + 6'000'000'000ull, 1000 + 6'000'000'000ull);
  p.StopEvent(op);
  ASSERT_EQ(hook_.records.size(), 1u);
  EXPECT_TRUE(hook_.records[0].flags & XPU_REC_DUR_US);
  EXPECT_EQ(hook_.records[0].duration, 6'000'000u);
}

TEST_F(ProfilerCoreTest, ClockOffsetFollowsTheLowerEnvelope) {
  ClockOffset c;
  int64_t off = 0;
  EXPECT_FALSE(c.Get(&off));
  c.Observe(1000, 5000);
  c.Observe(2000, 5900);
  ASSERT_TRUE(c.Get(&off));
  EXPECT_EQ(off, 3900);
  // One window later the old minimum still counts (previous window) ...
  const uint64_t h3 = 5000 + ClockOffset::kWindowNs + 1;
  c.Observe(h3 - 4500, h3);
  ASSERT_TRUE(c.Get(&off));
  EXPECT_EQ(off, 3900);
  // ... two windows later it has aged out (drift is followed).
  const uint64_t h4 = h3 + ClockOffset::kWindowNs + 1;
  c.Observe(h4 - 4600, h4);
  ASSERT_TRUE(c.Get(&off));
  EXPECT_EQ(off, 4500);
}

// Ops issued on several threads, channels completed on others: every op is
// written exactly once and every slot is returned.
TEST_F(ProfilerCoreTest, ConcurrentOpsAllComplete) {
  Profiler p(FakeApi(), 64, 256);
  int mask = 0;
  ASSERT_EQ(p.Init(&ctx_, 42, &mask, 2, 0), ncclSuccess);
  constexpr int kThreads = 4, kOps = 500;
  for (int i = 0; i < kThreads * kOps; ++i) {
    hook_.answers.push_back(Issued(1, static_cast<uint32_t>(i + 1), 0, 1, 0));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kOps; ++i) {
        xpu_nccl_event_descr_v5_t d = Coll("AllReduce", 1, "ncclInt8", 0, 2);
        void* op = nullptr;
        while (op == nullptr) p.StartEvent(ctx_, &op, &d);
        void* ch[2] = {nullptr, nullptr};
        std::thread proxy([&] {
          for (int c = 0; c < 2; ++c) {
            xpu_nccl_event_descr_v5_t cd = Child(kNcclProfileKernelCh, op);
            cd.kernelCh.pTimer = 100;
            while (ch[c] == nullptr) p.StartEvent(ctx_, &ch[c], &cd);
            xpu_nccl_state_args_v5_t a;
            memset(&a, 0, sizeof(a));
            a.kernelCh.pTimer = 200;
            p.RecordEventState(ch[c], kNcclKernelChStop, &a);
            p.StopEvent(ch[c]);
          }
        });
        p.StopEvent(op);
        proxy.join();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(hook_.records.size(), static_cast<size_t>(kThreads * kOps));
  EXPECT_EQ(p.LiveOps(), 0u);
  EXPECT_EQ(p.stats().children_late.load(), 0u);
}

}  // namespace
}  // namespace xpu::nccl_profiler
