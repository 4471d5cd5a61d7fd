// hook/tracing/gpu_op_unittest.cc — the traced-op path end to end inside the
// core: BeginGpuOp/EndGpuOp, event pool creation, sampler, completion polling
// in FIFO order per stream, record contents, and the host-event API, against
// fake CUDA functions. The test plays the background thread (PollOnce). One
// runtime per process: the tests share it and run in file order.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hook/core_api.h"
#include "hook/process/runtime.h"
#include "hook/ring/ring_reader_for_test.h"
#include "hook/tracing/fake_cuda_for_test.h"
#include "hook/tracing/record_fields.h"
#include "xpu/hook_api.h"

namespace xpu::hook {
namespace {

using namespace xpu::hook::testing;  // NOLINT

const void* const kStreamA = reinterpret_cast<const void*>(0xA000);
const void* const kStreamB = reinterpret_cast<const void*>(0xB000);

class PendingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (GetRuntime() != nullptr) return;
    Config c = LoadConfig([](const char*) -> const char* { return nullptr; }, getpid(), getuid(),
                          "testhost");
    c.daemon = false;
    c.daemon_socket = "/nonexistent-xpu-dir/daemon.sock";
    c.sample_first = 2;
    c.sample_every = 3;
    c.event_pool = 64;
    c.pending_max = 64;
    c.ring_capacity = 1024;
    std::string err;
    ASSERT_TRUE(InitRuntime(c, getpid(), &err)) << err;
    MarkStartedForTest();
    Runtime* rt = GetRuntime();
    InstallFakeCuda(&rt->cuda);
    rt->cuda_ready.store(true);
  }
  void SetUp() override {
    rt_ = GetRuntime();
    ASSERT_NE(rt_, nullptr);
    g_auto_complete = false;
    g_gpu_ms = 0;
    reader_ = std::make_unique<TestRingReader>(rt_->ring.header(), rt_->ring.slots());
    EnsurePool();
  }
  void EnsurePool() {
    if (rt_->pool.state(0) == EventPool::kReady) return;
    // First sight of device 0 only requests the pool; the background thread creates it.
    OpHandle h = BeginGpuOp(Sig(XPU_OP_GEMM, 1), kStreamA, 0, 0);
    EXPECT_EQ(h.slot, 0u);
    EXPECT_EQ(rt_->pool.state(0), EventPool::kRequested);
    EXPECT_EQ(rt_->pool.ServiceRequests(&rt_->clock), 1);
    ASSERT_EQ(rt_->pool.state(0), EventPool::kReady);
    ASSERT_TRUE(rt_->clock.Calibrated(0));
  }
  static uint32_t Sig(uint16_t kind, uint32_t m) {
    xpu_signature_v1 s;
    memset(&s, 0, sizeof(s));
    s.kind = kind;
    s.m = m;
    s.device = 0;
    return InternSignature(s, "op", 2);
  }
  std::vector<xpu_record_v1> Drain() {
    std::vector<xpu_record_v1> out;
    xpu_record_v1 r;
    while (reader_->Next(&r) == TestRingReader::Result::kRecord) out.push_back(r);
    return out;
  }
  uint64_t Counter(xpu_counter c) { return rt_->ring.Counter(c); }
  // Completes every fake event recorded so far.
  static void GpuCatchesUp() {
    for (auto& e : g_event_store) e.done = true;
  }

  Runtime* rt_ = nullptr;
  std::unique_ptr<TestRingReader> reader_;
};

TEST_F(PendingTest, TimedOpMapsGpuTimesIntoHostClock) {
  Drain();
  // A known reference: GPU 0 ms == host now.
  cudaEvent_t ref;
  FakeEventCreate(&ref, cudaEventDefault);
  FakeEventRecord(ref, nullptr);
  const uint64_t ref_host = NowNs();
  rt_->clock.SetReferenceForTest(0, ref, ref_host);

  uint32_t sig = Sig(XPU_OP_GEMM, 100);
  g_gpu_ms = 10.0;
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.slot, 0u);
  g_gpu_ms = 10.25;
  EndGpuOp(h, kStreamA, 0);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);  // GPU not done yet
  EXPECT_TRUE(Drain().empty());
  GpuCatchesUp();
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  const xpu_record_v1& r = recs[0];
  EXPECT_EQ(r.sig_id, sig);
  EXPECT_EQ(r.flags & (XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_ISSUE_LAT_VALID),
            XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_ISSUE_LAT_VALID);
  EXPECT_EQ(r.flags & XPU_REC_NOT_TIMED, 0);
  EXPECT_EQ(r.start_ns, ref_host + 10000000ull);
  EXPECT_EQ(r.duration, 250000u);
  EXPECT_EQ(r.issue_latency_ns, static_cast<int32_t>(static_cast<int64_t>(r.start_ns) -
                                                     static_cast<int64_t>(h.launch_ns)));
  EXPECT_EQ(r.stream, StreamIndex(kStreamA));
  EXPECT_GE(r.seq, 1u);  // per-stream launch count
  EXPECT_EQ(rt_->ring.header()->device, 0);
}

TEST_F(PendingTest, SamplerTimesFirstNThenOneInEvery) {
  Drain();
  g_auto_complete = true;
  uint32_t sig = Sig(XPU_OP_ALLREDUCE, 7);
  std::vector<uint64_t> launches;
  for (int i = 0; i < 8; ++i) {
    OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
    ASSERT_NE(h.slot, 0u);
    launches.push_back(h.launch_ns);
    EndGpuOp(h, kStreamA, 0);
  }
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 8);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 8u);
  // first = 2, every = 3: occurrences 1, 2, 5, 8 are timed.
  const bool want_timed[] = {true, true, false, false, true, false, false, true};
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((recs[i].flags & XPU_REC_TIMED) != 0, want_timed[i]);
    EXPECT_EQ((recs[i].flags & XPU_REC_NOT_TIMED) != 0, !want_timed[i]);
    if (!want_timed[i]) {
      EXPECT_EQ(recs[i].start_ns, launches[i]);  // CPU launch time
      EXPECT_EQ(recs[i].flags & XPU_REC_ISSUE_LAT_VALID, 0);
    }
    if (i > 0) {
      EXPECT_EQ(recs[i].seq, recs[i - 1].seq + 1);
    }
  }
}

// A caller with its own timer (the NCCL interposer when the profiler plugin
// times collectives) asks for completion tracking only, even for occurrences
// the sampler would pick.
TEST_F(PendingTest, NotTimedRequestSkipsTimingEvents) {
  Drain();
  g_auto_complete = true;
  uint32_t sig = Sig(XPU_OP_ALLREDUCE, 11);
  OpHandle h = BeginGpuOp(sig, kStreamA, 9, XPU_REC_NOT_TIMED);
  ASSERT_NE(h.slot, 0u);
  EXPECT_EQ(rt_->pending.op(h.slot).start_ev, 0u);
  EXPECT_NE(rt_->pending.op(h.slot).end_ev, 0u);
  EndGpuOp(h, kStreamA, 0);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].flags & XPU_REC_NOT_TIMED, XPU_REC_NOT_TIMED);
  EXPECT_EQ(recs[0].flags & (XPU_REC_TIMED | XPU_REC_SAMPLED), 0);
  EXPECT_EQ(recs[0].seq, 9u);
}

TEST_F(PendingTest, CompletionIsFifoPerStreamAndCallerSeqWins) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 200);
  OpHandle a = BeginGpuOp(sig, kStreamB, 41, 0);
  EndGpuOp(a, kStreamB, 0);
  PendingOp& pa = rt_->pending.op(a.slot);
  uint32_t a_end = pa.end_ev;
  OpHandle b = BeginGpuOp(sig, kStreamB, 42, 0);
  EndGpuOp(b, kStreamB, 0);
  ASSERT_NE(a.slot, 0u);
  ASSERT_NE(b.slot, 0u);
  GpuCatchesUp();
  AsFake(rt_->pool.Get(a_end))->done = false;  // the older op is still running
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);
  EXPECT_EQ(rt_->worker.pending_count(), 2u);
  AsFake(rt_->pool.Get(a_end))->done = true;
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 2);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].seq, 41u);
  EXPECT_EQ(recs[1].seq, 42u);
}

TEST_F(PendingTest, FailedCallWritesCallFailedAndReturnsEvents) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 300);
  uint32_t in_flight = rt_->pending.in_flight();
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.slot, 0u);
  EndGpuOp(h, kStreamA, /*status=*/700);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].flags & XPU_REC_CALL_FAILED, 0);
  EXPECT_NE(recs[0].flags & XPU_REC_NOT_TIMED, 0);
  EXPECT_EQ(recs[0].flags & XPU_REC_TIMED, 0);
  EXPECT_EQ(rt_->pending.in_flight(), in_flight);
}

TEST_F(PendingTest, GraphCaptureRecordsLaunchWithoutEvents) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 400);
  int records_before = g_event_records;
  uint64_t skipped = Counter(XPU_CNT_CAPTURE_SKIPPED);
  OpHandle h = BeginGpuOp(sig, g_capturing_stream, 0, 0);
  ASSERT_NE(h.slot, 0u);
  EndGpuOp(h, g_capturing_stream, 0);
  EXPECT_EQ(g_event_records, records_before);  // nothing recorded into the capture
  EXPECT_EQ(Counter(XPU_CNT_CAPTURE_SKIPPED), skipped + 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].flags & XPU_REC_GRAPH_CAPTURE, 0);
  EXPECT_NE(recs[0].flags & XPU_REC_NOT_TIMED, 0);
}

TEST_F(PendingTest, PendingTableFullIsCounted) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 500);
  std::vector<OpHandle> held;
  uint64_t full = Counter(XPU_CNT_PENDING_FULL);
  for (uint32_t i = 0; i < rt_->pending.capacity() + 3; ++i) {
    OpHandle h = BeginGpuOp(sig, g_capturing_stream, 0, 0);
    if (h.slot != 0) held.push_back(h);
  }
  EXPECT_EQ(held.size(), rt_->pending.capacity());
  EXPECT_EQ(Counter(XPU_CNT_PENDING_FULL), full + 3);
  for (const OpHandle& h : held) EndGpuOp(h, g_capturing_stream, 0);
  EXPECT_EQ(Drain().size(), held.size());
  EXPECT_NE(BeginGpuOp(sig, g_capturing_stream, 0, 0).slot, 0u);  // slots came back
}

TEST_F(PendingTest, UntrackedOpsStillWriteCpuSideRecords) {
  // When no slot is free the op cannot be completion-tracked, but its
  // occurrence (and its sequence number) must not go missing.
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 550);
  std::vector<OpHandle> held, untracked;
  for (uint32_t i = 0; i < rt_->pending.capacity() + 2; ++i) {
    OpHandle h = BeginGpuOp(sig, g_capturing_stream, /*seq=*/1000 + i, 0);
    (h.slot != 0 ? held : untracked).push_back(h);
  }
  ASSERT_GE(untracked.size(), 2u);  // an earlier test may still hold a slot
  for (const OpHandle& h : untracked) EndGpuOp(h, g_capturing_stream, 0);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), untracked.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].sig_id, sig);
    EXPECT_EQ(recs[i].seq, untracked[i].seq);
    EXPECT_NE(recs[i].flags & XPU_REC_UNTRACKED, 0);
    EXPECT_NE(recs[i].flags & XPU_REC_NOT_TIMED, 0);
    EXPECT_EQ(recs[i].flags & XPU_REC_TIMED, 0);
  }
  for (const OpHandle& h : held) EndGpuOp(h, g_capturing_stream, 0);
  EXPECT_EQ(Drain().size(), held.size());
}

TEST_F(PendingTest, FlushWritesIncomplete) {
  Drain();
  uint32_t sig = Sig(XPU_OP_KERNEL, 600);  // kernels reaching the core are always timed
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.slot, 0u);
  EXPECT_NE(rt_->pending.op(h.slot).start_ev, 0u);
  EndGpuOp(h, kStreamA, 0);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);
  EXPECT_EQ(rt_->worker.FlushIncomplete(NowNs()), 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].flags & XPU_REC_INCOMPLETE, 0);
  EXPECT_NE(recs[0].flags & XPU_REC_NOT_TIMED, 0);
  EXPECT_EQ(recs[0].flags & XPU_REC_TIMED, 0);
  EXPECT_EQ(rt_->worker.pending_count(), 0u);
}

TEST_F(PendingTest, DisabledAtRunTimeTracesNothing) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 700);
  EXPECT_EQ(xpu_set_enabled(0), 1);
  EXPECT_EQ(xpu_is_enabled(), 0);
  EXPECT_FALSE(Active());
  EXPECT_EQ(BeginGpuOp(sig, kStreamA, 0, 0).slot, 0u);
  EmitHostInterval(sig, 1, 2, 3, 0);
  EXPECT_EQ(rt_->ring.header()->producer_state, XPU_PRODUCER_DISABLED);
  EXPECT_EQ(xpu_set_enabled(1), 0);
  EXPECT_EQ(rt_->ring.header()->producer_state, XPU_PRODUCER_ACTIVE);
  EXPECT_TRUE(Drain().empty());
}

TEST_F(PendingTest, HostEventsAndCApi) {
  Drain();
  uint32_t gc = xpu_intern_host_signature(XPU_OP_PY_GC, "gc", 2, 2);
  ASSERT_NE(gc, 0u);
  EXPECT_EQ(rt_->ring.signatures()[gc].peer, 2);
  EXPECT_EQ(xpu_intern_host_signature(XPU_OP_GEMM, "x", 1, 0), 0u);  // not a host kind
  EXPECT_EQ(xpu_emit_host_event(gc, 1000, 6000, 17, XPU_REC_BEGIN), 0);
  EXPECT_EQ(xpu_mark_step(9, 100, 200), 0);
  xpu_record_v1 plugin{};
  plugin.sig_id = gc;
  plugin.flags = XPU_REC_PLUGIN | XPU_REC_TIMED;
  plugin.duration = 5;
  EXPECT_EQ(xpu_emit_record(&plugin), 0);
  EXPECT_EQ(xpu_comm_id(nullptr), 0u);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].sig_id, gc);
  EXPECT_EQ(recs[0].start_ns, 1000u);
  EXPECT_EQ(recs[0].duration, 5000u);
  EXPECT_EQ(recs[0].seq, 17u);
  EXPECT_EQ(recs[0].flags, XPU_REC_HOST | XPU_REC_BEGIN);
  EXPECT_NE(recs[0].stream, 0u);  // thread index
  EXPECT_EQ(rt_->sigs.KindOf(recs[1].sig_id), XPU_OP_STEP);
  EXPECT_EQ(recs[1].seq, 9u);
  EXPECT_EQ(recs[2].flags, XPU_REC_PLUGIN | XPU_REC_TIMED);
  EXPECT_GE(Counter(XPU_CNT_PLUGIN_EVENTS), 1u);
}

TEST_F(PendingTest, ForkedChildStopsProducing) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 800);
  uint64_t before = rt_->ring.header()->write_index;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    DisableInForkedChild();  // what the atfork handler does
    int bad = 0;
    if (Active() || HostActive()) bad |= 1;
    if (BeginGpuOp(sig, kStreamA, 0, 0).slot != 0) bad |= 2;
    EmitHostInterval(sig, 1, 2, 3, 0);
    if (InternSignature(xpu_signature_v1{}, "child", 5) != 0) bad |= 4;
    xpu_record_v1 r{};
    if (xpu_emit_record(&r) != -1) bad |= 8;
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(rt_->ring.header()->write_index, before);  // shared mapping untouched
  EXPECT_EQ(rt_->ring.header()->producer_state, XPU_PRODUCER_ACTIVE);
  EXPECT_TRUE(Active());
}

TEST_F(PendingTest, ReentrancyGuardOutermostOnlyAndNestedCounted) {
  uint64_t before = Counter(XPU_CNT_REENTRANT);
  {
    ReentrancyGuard outer;
    EXPECT_TRUE(outer.entered());
    {
      ReentrancyGuard inner;
      EXPECT_FALSE(inner.entered());
    }
  }
  ReentrancyGuard again;
  EXPECT_TRUE(again.entered());
  EXPECT_EQ(Counter(XPU_CNT_REENTRANT), before + 1);
}

TEST(StreamIndexTest, InternsPointers) {
  EXPECT_EQ(StreamIndex(nullptr), 0);
  EXPECT_EQ(StreamIndex(reinterpret_cast<const void*>(1)), 0);  // cudaStreamLegacy
  uint16_t a = StreamIndex(reinterpret_cast<const void*>(0x7000));
  uint16_t b = StreamIndex(reinterpret_cast<const void*>(0x7010));
  EXPECT_NE(a, 0);
  EXPECT_NE(b, 0);
  EXPECT_NE(a, b);
  EXPECT_EQ(StreamIndex(reinterpret_cast<const void*>(0x7000)), a);
}

TEST(DurationTest, EncodingAndSaturation) {
  uint16_t f = 0;
  EXPECT_EQ(EncodeDuration(123, &f), 123u);
  EXPECT_EQ(f, 0);
  EXPECT_EQ(EncodeDuration(uint64_t{1} << 32, &f), (uint64_t{1} << 32) / 1000);
  EXPECT_EQ(f, XPU_REC_DUR_US);
  f = 0;
  EXPECT_EQ(EncodeDuration(UINT64_MAX, &f), UINT32_MAX);
  EXPECT_EQ(f, XPU_REC_DUR_US | XPU_REC_DUR_SATURATED);
  EXPECT_EQ(SaturateI32(int64_t{1} << 40), INT32_MAX);
  EXPECT_EQ(SaturateI32(-(int64_t{1} << 40)), INT32_MIN);
  EXPECT_EQ(SaturateI32(-5), -5);
  EXPECT_TRUE(SampleDecision(1, 2, 3));
  EXPECT_FALSE(SampleDecision(3, 2, 3));
  EXPECT_TRUE(SampleDecision(5, 2, 3));
  EXPECT_FALSE(SampleDecision(5, 2, 0));
}

}  // namespace
}  // namespace xpu::hook
