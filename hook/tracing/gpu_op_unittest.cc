// hook/tracing/gpu_op_unittest.cc — the traced-op path end to end inside the
// core: BeginGpuOp/EndGpuOp, event pool creation, sampler, completion
// evidence (markers, plugin notices, host syncs) in FIFO order per thread and
// stream, stream holds, record contents, and the host-event API, against
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
    rt_->marker_ns = 0;  // a marker after every op unless a test says otherwise
    rt_->config.sample_every = 3;
    reader_ = std::make_unique<TestRingReader>(rt_->ring.header(), rt_->ring.slots());
    EnsurePool();
  }
  void EnsurePool() {
    if (rt_->pool.state(0) == EventPool::kReady) return;
    // First sight of device 0 only requests the pool; the background thread creates it.
    OpHandle h = BeginGpuOp(Sig(XPU_OP_GEMM, 1), kStreamA, 0, 0);
    EXPECT_EQ(h.ev_start, 0u);
    EndGpuOp(h, kStreamA, 0);
    EXPECT_EQ(rt_->pool.state(0), EventPool::kRequested);
    EXPECT_EQ(rt_->pool.ServiceRequests(&rt_->clock), 1);
    ASSERT_EQ(rt_->pool.state(0), EventPool::kReady);
    ASSERT_TRUE(rt_->clock.Calibrated(0));
    // That op went untimed and unmarked; its thread's sync completes it.
    NoteHostSync(kStreamA, false);
    rt_->worker.PollOnce(NowNs());
    EXPECT_EQ(rt_->worker.pending_count(), 0u);
    Drain();
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

// The event pair's own overhead, measured per device (event_overhead.h), is
// taken out of event-timed durations with XPU_TIMING_CORRECT=1: half before
// the op, half after.
TEST_F(PendingTest, EventOverheadIsSubtracted) {
  Drain();
  cudaEvent_t ref;
  FakeEventCreate(&ref, cudaEventDefault);
  FakeEventRecord(ref, nullptr);
  const uint64_t ref_host = NowNs();
  rt_->clock.SetReferenceForTest(0, ref, ref_host);
  rt_->overhead.SetForTest(0, 4000);
  rt_->config.timing_correct = true;  // XPU_TIMING_CORRECT=1 (off by default)
  uint32_t sig = Sig(XPU_OP_GEMM, 101);
  g_gpu_ms = 1.0;
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  g_gpu_ms = 1.010;  // 10 us measured by the events
  EndGpuOp(h, kStreamA, 0);
  GpuCatchesUp();
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NEAR(recs[0].duration, 6000u, 1);
  EXPECT_NEAR(static_cast<double>(recs[0].start_ns), static_cast<double>(ref_host + 1002000), 1);
  rt_->config.timing_correct = false;  // XPU_TIMING_CORRECT=0: the raw pair
  h = BeginGpuOp(sig, kStreamA, 0, 0);
  g_gpu_ms = 1.020;
  EndGpuOp(h, kStreamA, 0);
  GpuCatchesUp();
  rt_->worker.PollOnce(NowNs());
  recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NEAR(recs[0].duration, 10000u, 1);  // 1.010 to 1.020 ms, uncorrected
  rt_->overhead.SetForTest(0, 0);
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
// times collectives) gets no event at all, not even a marker: the plugin's
// record announces the op's completion.
TEST_F(PendingTest, PluginTimedOpCompletesWithThePluginRecord) {
  Drain();
  g_auto_complete = true;
  uint32_t sig = Sig(XPU_OP_ALLREDUCE, 11);
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;
  const int records_before = g_event_records;
  OpHandle h = BeginGpuOp(sig, kStreamA, 9, XPU_REC_NOT_TIMED);
  ASSERT_NE(h.slot, 0u);
  EXPECT_EQ(h.ev_start, 0u);
  EndGpuOp(h, kStreamA, 0);
  EXPECT_EQ(g_event_records, records_before);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);  // nothing says it finished yet
  xpu_record_v1 plugin{};
  plugin.sig_id = sig;
  plugin.seq = 9;
  plugin.stream = StreamIndex(kStreamA);
  plugin.flags = XPU_REC_PLUGIN | XPU_REC_TIMED;
  ASSERT_EQ(xpu_emit_record(&plugin), 0);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 2u);  // the plugin's, then the interposer's
  EXPECT_NE(recs[0].flags & XPU_REC_PLUGIN, 0);
  EXPECT_EQ(recs[1].flags & XPU_REC_NOT_TIMED, XPU_REC_NOT_TIMED);
  EXPECT_EQ(recs[1].flags & (XPU_REC_TIMED | XPU_REC_SAMPLED | XPU_REC_PLUGIN), 0);
  EXPECT_EQ(recs[1].seq, 9u);
}

// A collective that is not plugin-timed always gets its own marker, whatever
// the quantum: hang diagnosis needs collectives' completion exactly.
TEST_F(PendingTest, CollectivesGetTheirOwnMarker) {
  Drain();
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;
  uint32_t sig = Sig(XPU_OP_ALLREDUCE, 12);
  for (int i = 0; i < 2; ++i) EndGpuOp(BeginGpuOp(sig, kStreamA, 0, 0), kStreamA, 0);
  const int before = g_event_records;
  for (int i = 0; i < 2; ++i) {
    OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);  // occurrences 3 and 4: untimed
    ASSERT_EQ(h.ev_start, 0u);
    EndGpuOp(h, kStreamA, 0);
  }
  EXPECT_EQ(g_event_records, before + 2);
  GpuCatchesUp();
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 4);
  EXPECT_EQ(Drain().size(), 4u);
}

TEST_F(PendingTest, CompletionIsFifoPerStreamAndCallerSeqWins) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 200);
  OpHandle a = BeginGpuOp(sig, kStreamB, 41, 0);
  EndGpuOp(a, kStreamB, 0);
  FakeEvent* a_end = g_last_recorded;
  OpHandle b = BeginGpuOp(sig, kStreamB, 42, 0);
  EndGpuOp(b, kStreamB, 0);
  ASSERT_NE(a.slot, 0u);
  ASSERT_NE(b.slot, 0u);
  GpuCatchesUp();
  a_end->done = false;  // the older op is still running
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);
  EXPECT_EQ(rt_->worker.pending_count(), 2u);
  a_end->done = true;
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 2);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].seq, 41u);
  EXPECT_EQ(recs[1].seq, 42u);
}

// Between markers, ops make no CUDA call; a marker completes every earlier op
// of its thread on its stream, a host sync the ones after the last marker.
TEST_F(PendingTest, OneMarkerPerQuantumAndSyncsCompleteTheRest) {
  Drain();
  rt_->config.sample_every = 0;  // only the first two occurrences are timed
  GpuCatchesUp();
  g_auto_complete = true;
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;  // one marker for the whole test
  const void* stream = reinterpret_cast<const void*>(0xC000);
  uint32_t sig = Sig(XPU_OP_GEMM, 210);
  for (int i = 0; i < 2; ++i) EndGpuOp(BeginGpuOp(sig, kStreamA, 0, 0), kStreamA, 0);  // timed
  const int before = g_event_records;
  std::vector<OpHandle> ops;
  for (int i = 0; i < 5; ++i) {
    ops.push_back(BeginGpuOp(sig, stream, 0, 0));
    EXPECT_EQ(ops.back().ev_start, 0u);  // past the first two: untimed
    EndGpuOp(ops.back(), stream, 0);
  }
  EXPECT_EQ(g_event_records, before + 1);  // the first op on this stream carries the marker
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 2 + 1);
  EXPECT_EQ(rt_->worker.pending_count(), 4u);
  // The hang watch is not shown ops that nothing will decide.
  WatchedOp heads[8];
  EXPECT_EQ(rt_->tracker.WatchedHeads(heads, 8), 0u);
  const uint64_t before_sync = NowNs();
  NoteHostSync(stream, false);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);
  EXPECT_EQ(rt_->worker.pending_count(), 0u);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 2u + 5u);
  for (size_t i = 3; i < recs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(recs[i].seq, ops[i - 2].seq);
    EXPECT_EQ(recs[i].flags & (XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED), XPU_REC_NOT_TIMED);
    EXPECT_GE(recs[i].start_ns + recs[i].duration, before_sync);  // ends at the sync
  }
  // A device-wide sync covers every stream of the thread.
  for (int i = 0; i < 3; ++i) EndGpuOp(BeginGpuOp(sig, stream, 0, 0), stream, 0);
  for (int i = 0; i < 3; ++i) EndGpuOp(BeginGpuOp(sig, kStreamB, 0, 0), kStreamB, 0);
  rt_->worker.PollOnce(NowNs());
  NoteHostSync(nullptr, true);
  rt_->worker.PollOnce(NowNs());
  EXPECT_EQ(rt_->worker.pending_count(), 0u);
  EXPECT_EQ(Drain().size(), 6u);
}

// Ops that no marker, notice or sync will ever cover are retired after
// XPU_UNCOVERED_MS, on record but flagged: completion unknown.
TEST_F(PendingTest, UncoveredOpsAreRetiredAsUntracked) {
  Drain();
  rt_->config.sample_every = 0;  // only the first two occurrences are timed
  GpuCatchesUp();
  g_auto_complete = true;
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;
  const void* stream = reinterpret_cast<const void*>(0xC100);
  uint32_t sig = Sig(XPU_OP_GEMM, 220);
  for (int i = 0; i < 2; ++i) EndGpuOp(BeginGpuOp(sig, kStreamA, 0, 0), kStreamA, 0);
  for (int i = 0; i < 3; ++i) EndGpuOp(BeginGpuOp(sig, stream, 0, 0), stream, 0);
  const uint64_t now = NowNs();
  EXPECT_EQ(rt_->worker.PollOnce(now), 3);  // the two timed ones and the marked one
  const uint64_t uncovered = Counter(XPU_CNT_UNCOVERED);
  EXPECT_EQ(rt_->worker.PollOnce(now + 3ull * 1000 * 1000 * 1000), 2);
  EXPECT_EQ(Counter(XPU_CNT_UNCOVERED), uncovered + 2);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[4].flags & (XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED),
            XPU_REC_NOT_TIMED | XPU_REC_UNTRACKED);
  EXPECT_EQ(recs[4].duration, 0u);
}

// The plugin's record of a collective also completes what its thread
// launched earlier on the same stream, and may arrive before the op left
// the launching thread's lane.
TEST_F(PendingTest, PluginNoticeCompletesEarlierOpsOfItsStream) {
  Drain();
  rt_->config.sample_every = 0;  // only the first two occurrences are timed
  GpuCatchesUp();
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;
  const void* stream = reinterpret_cast<const void*>(0xC200);
  uint32_t gemm = Sig(XPU_OP_GEMM, 230);
  uint32_t ar = Sig(XPU_OP_ALLREDUCE, 231);
  g_auto_complete = false;
  for (int i = 0; i < 2; ++i) EndGpuOp(BeginGpuOp(gemm, kStreamA, 0, 0), kStreamA, 0);
  GpuCatchesUp();
  rt_->worker.PollOnce(NowNs());
  for (int i = 0; i < 3; ++i) EndGpuOp(BeginGpuOp(gemm, stream, 0, 0), stream, 0);
  OpHandle h = BeginGpuOp(ar, stream, 77, XPU_REC_NOT_TIMED);
  xpu_record_v1 plugin{};
  plugin.sig_id = ar;
  plugin.seq = 77;
  plugin.stream = StreamIndex(stream);
  plugin.flags = XPU_REC_PLUGIN | XPU_REC_TIMED;
  ASSERT_EQ(xpu_emit_record(&plugin), 0);  // before the op reached its lane
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 0);
  EndGpuOp(h, stream, 0);
  EXPECT_EQ(rt_->worker.PollOnce(NowNs()), 4);
  EXPECT_EQ(rt_->worker.pending_count(), 0u);
  EXPECT_EQ(Drain().size(), 2u + 1u + 4u);
}

TEST_F(PendingTest, FailedCallWritesCallFailedAndReturnsEvents) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 300);
  const uint32_t pending = rt_->worker.pending_count();
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.slot, 0u);
  ASSERT_NE(h.ev_start, 0u);  // first occurrence: timed
  EndGpuOp(h, kStreamA, /*status=*/700);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].flags & XPU_REC_CALL_FAILED, 0);
  EXPECT_NE(recs[0].flags & XPU_REC_NOT_TIMED, 0);
  EXPECT_EQ(recs[0].flags & XPU_REC_TIMED, 0);
  rt_->worker.PollOnce(NowNs());
  EXPECT_EQ(rt_->worker.pending_count(), pending);
}

TEST_F(PendingTest, GraphCaptureRecordsLaunchWithoutEvents) {
  Drain();
  uint32_t sig = Sig(XPU_OP_GEMM, 400);
  int records_before = g_event_records;
  uint64_t skipped = Counter(XPU_CNT_CAPTURE_SKIPPED);
  OpHandle h = BeginGpuOp(sig, g_capturing_stream, 0, 0);  // timed: checks capture
  ASSERT_NE(h.slot, 0u);
  EndGpuOp(h, g_capturing_stream, 0);
  EXPECT_EQ(g_event_records, records_before);  // nothing recorded into the capture
  EXPECT_EQ(Counter(XPU_CNT_CAPTURE_SKIPPED), skipped + 1);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_NE(recs[0].flags & XPU_REC_GRAPH_CAPTURE, 0);
  EXPECT_NE(recs[0].flags & XPU_REC_NOT_TIMED, 0);
  // An untimed launch checks capture only while an interposed capture is
  // active; a marker never goes into a capturing stream either way.
  rt_->config.sample_every = 0;
  EndGpuOp(BeginGpuOp(sig, g_capturing_stream, 0, 0), g_capturing_stream, 0);  // timed
  EndGpuOp(BeginGpuOp(sig, g_capturing_stream, 0, 0), g_capturing_stream, 0);  // unknown
  NoteCapture(1);
  EndGpuOp(BeginGpuOp(sig, g_capturing_stream, 0, 0), g_capturing_stream, 0);
  NoteCapture(-1);
  EXPECT_EQ(g_event_records, records_before);
  recs = Drain();
  ASSERT_EQ(recs.size(), 2u);  // the second stays pending: nothing covers it yet
  EXPECT_NE(recs[0].flags & XPU_REC_GRAPH_CAPTURE, 0);
  EXPECT_NE(recs[1].flags & XPU_REC_GRAPH_CAPTURE, 0);
  NoteHostSync(g_capturing_stream, false);
  rt_->worker.PollOnce(NowNs());
  EXPECT_EQ(Drain().size(), 1u);
}

TEST_F(PendingTest, FullLaneFallsBackToHostRecords) {
  // The completion thread is not polling: the lane fills, and the ops that
  // do not fit keep their occurrence (and sequence number) on record.
  Drain();
  rt_->worker.PollOnce(NowNs());
  ASSERT_TRUE(rt_->lanes.AllDrained());
  g_auto_complete = true;
  rt_->config.sample_first = 0;  // untimed and unmarked: one lane entry per op
  rt_->config.sample_every = 0;
  rt_->marker_ns = 1000ull * 1000 * 1000 * 1000;
  uint32_t sig = Sig(XPU_OP_GEMM, 500);
  const uint64_t full = Counter(XPU_CNT_PENDING_FULL);
  const uint32_t n = OpLanes::kLaneCapacity + 3;
  for (uint32_t i = 0; i < n; ++i) EndGpuOp(BeginGpuOp(sig, kStreamA, 1000 + i, 0), kStreamA, 0);
  EXPECT_EQ(Counter(XPU_CNT_PENDING_FULL), full + 3);
  auto recs = Drain();
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& r : recs) {
    EXPECT_EQ(r.sig_id, sig);
    EXPECT_NE(r.flags & XPU_REC_UNTRACKED, 0);
    EXPECT_NE(r.flags & XPU_REC_NOT_TIMED, 0);
  }
  EXPECT_EQ(recs[0].seq, 1000u + OpLanes::kLaneCapacity);
  // The tracker holds pending_max ops at a time: once full, it retires the
  // oldest ops that nothing covers (counted) to take more from the lane.
  uint64_t later = NowNs() + 10ull * 1000 * 1000 * 1000;
  size_t records = 0;  // the test ring holds 1024: read it as we go
  for (int round = 0; round < 1000 && !rt_->lanes.AllDrained(); ++round) {
    rt_->worker.PollOnce(later += 100ull * 1000 * 1000);
    records += Drain().size();
  }
  rt_->worker.PollOnce(later += 100ull * 1000 * 1000);
  records += Drain().size();
  EXPECT_EQ(rt_->worker.pending_count(), 0u);
  EXPECT_TRUE(rt_->lanes.AllDrained());
  // The test ring (1024 records) overflows while one poll retires thousands.
  EXPECT_EQ(records + Counter(XPU_CNT_DROPPED_FULL), OpLanes::kLaneCapacity);
  EXPECT_GT(Counter(XPU_CNT_PENDING_FULL), full + 3);  // evictions
  rt_->config.sample_first = 2;
}

TEST_F(PendingTest, FlushWritesIncomplete) {
  Drain();
  uint32_t sig = Sig(XPU_OP_KERNEL, 600);  // kernels reaching the core are always timed
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.slot, 0u);
  EXPECT_NE(h.ev_start, 0u);
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

// Timed ops hold their stream from before the start event until the end
// event is recorded; the timeout releases a hold whose launch never returns.
TEST_F(PendingTest, TimedOpsHoldTheStreamUntilEnqueued) {
  Drain();
  static uint32_t flags[StreamHolds::kSlots];
  rt_->cuda.cu_stream_wait_value32.store(&FakeWaitValue32);
  rt_->holds.SetUpForTest(0, flags);
  uint32_t sig = Sig(XPU_OP_KERNEL, 610);
  const int waits = g_waits;
  OpHandle h = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(h.hold, 0u);
  EXPECT_EQ(g_waits, waits + 1);
  EXPECT_FALSE(LastWaitReleased());
  EndGpuOp(h, kStreamA, 0);
  EXPECT_TRUE(LastWaitReleased());
  // A launch that never returns: released by the timeout, and counted.
  OpHandle stuck = BeginGpuOp(sig, kStreamA, 0, 0);
  ASSERT_NE(stuck.hold, 0u);
  EXPECT_EQ(rt_->holds.ReleaseExpired(NowNs()), 0u);
  EXPECT_FALSE(LastWaitReleased());
  EXPECT_EQ(rt_->holds.ReleaseExpired(NowNs() + rt_->holds.timeout_ns() + 1), 1u);
  EXPECT_TRUE(LastWaitReleased());
  EndGpuOp(stuck, kStreamA, 0);  // releasing again is harmless
  EXPECT_TRUE(LastWaitReleased());
  // A failed launch releases too.
  OpHandle failed = BeginGpuOp(sig, kStreamA, 0, 0);
  EndGpuOp(failed, kStreamA, 700);
  EXPECT_TRUE(LastWaitReleased());
  rt_->cuda.cu_stream_wait_value32.store(nullptr);  // no more holds for later tests
  GpuCatchesUp();
  rt_->worker.FlushIncomplete(NowNs());
  Drain();
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
