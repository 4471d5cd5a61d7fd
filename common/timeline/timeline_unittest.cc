// Tests of the timeline library on synthetic jobs whose ground truth is
// known (synthetic_job.h): clock offsets, trace validity (decoded by an
// independent protoc-generated decoder), flows, flame graph, summary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/timeline/callsite_join.h"
#include "common/timeline/clock_align.h"
#include "common/timeline/dump_outputs.h"
#include "common/timeline/flamegraph.h"
#include "common/timeline/proto_encoder.h"
#include "common/timeline/rank_dump.h"
#include "common/timeline/summary.h"
#include "common/timeline/synthetic_job.h"
#include "common/timeline/testing/trace_validator.h"
#include "common/timeline/trace_writer.h"

namespace xpu::timeline {
namespace {

std::vector<RankDump> Dumps(const SyntheticJob& j) {
  std::vector<RankDump> out;
  for (int r = 0; r < j.ranks; ++r) {
    absl::StatusOr<RankDump> d = FromProcessBatch(SyntheticRank(j, r));
    EXPECT_TRUE(d.ok());
    out.push_back(std::move(*d));
  }
  SortRanks(&out);
  return out;
}

std::string TempDir() {
  std::string base = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string t = base + "/xpu_timeline_XXXXXX";
  char* p = mkdtemp(t.data());
  EXPECT_NE(p, nullptr);
  return t;
}

std::string ReadFile(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ProtoEncoderTest, WireFormat) {
  ProtoEncoder e;
  e.Varint(1, 300);  // tag 0x08, 0xAC 0x02
  e.Fixed64(47, 1);  // tag (47<<3)|1 = 377 -> 0xF9 0x02
  e.Bytes(2, "hi");
  const std::string want("\x08\xAC\x02\xF9\x02\x01\x00\x00\x00\x00\x00\x00\x00\x12\x02hi", 17);
  EXPECT_EQ(e.data(), want);
  ProtoEncoder outer;
  outer.Message(11, e);
  EXPECT_EQ(outer.data().substr(0, 2), std::string("\x5A\x11", 2));
}

TEST(ClockAlignTest, RecoversInjectedHostSkew) {
  SyntheticJob j;
  j.ranks = 16;
  j.ranks_per_host = 4;
  j.steps = 60;
  j.host_offsets_ns = {0, 3200000, -1700000, 12345678};
  j.end_jitter_ns = 3000;
  j.outlier_fraction = 0.1;
  ClockAlignment a = EstimateClockOffsets(Dumps(j));
  ASSERT_EQ(a.hosts.size(), 4u);
  EXPECT_EQ(a.reference_rank, 0);
  EXPECT_EQ(a.reference_host, "node0");
  EXPECT_EQ(a.instances, 60u);
  for (int h = 0; h < 4; ++h) {
    EXPECT_EQ(a.hosts[h].host, SyntheticHost(h));
    EXPECT_TRUE(a.hosts[h].aligned);
    EXPECT_NEAR(static_cast<double>(a.OffsetFor(SyntheticHost(h))),
                static_cast<double>(j.host_offsets_ns[h]), 5000.0)
        << "host " << h;
  }
}

TEST(ClockAlignTest, ReferenceRankOnAnotherHost) {
  SyntheticJob j;
  j.ranks = 8;
  j.ranks_per_host = 2;
  j.steps = 30;
  j.host_offsets_ns = {0, 500000, -800000, 2000000};
  ClockAlignment a = EstimateClockOffsets(Dumps(j), /*reference_rank=*/5);
  EXPECT_EQ(a.reference_host, "node2");
  for (int h = 0; h < 4; ++h) {
    EXPECT_NEAR(static_cast<double>(a.OffsetFor(SyntheticHost(h))),
                static_cast<double>(j.host_offsets_ns[h] - j.host_offsets_ns[2]), 5000.0);
  }
}

TEST(ClockAlignTest, MeanWouldFailWhereMedianHolds) {
  // 30 % of ends delayed by 300 us: a mean-based estimate would be off by
  // tens of microseconds; the median stays within the jitter.
  SyntheticJob j;
  j.ranks = 4;
  j.ranks_per_host = 2;
  j.steps = 200;
  j.host_offsets_ns = {0, 7000000};
  j.end_jitter_ns = 1000;
  j.outlier_fraction = 0.3;
  ClockAlignment a = EstimateClockOffsets(Dumps(j));
  EXPECT_NEAR(static_cast<double>(a.OffsetFor("node1")), 7000000.0, 20000.0);
}

TEST(ClockAlignTest, HostWithoutSharedCollectivesIsNotAligned) {
  SyntheticJob j;
  j.ranks = 4;
  j.ranks_per_host = 2;
  j.steps = 5;
  std::vector<RankDump> d = Dumps(j);
  // Rank 3 (node1) talks on another communicator only: node1 is still
  // reachable through rank 2. Make both node1 ranks private.
  for (int r : {2, 3}) {
    for (auto& [id, s] : d[r].sigs) {
      if (s.collective()) s.comm_id = 0xBAD0 + r;
    }
  }
  ClockAlignment a = EstimateClockOffsets(d);
  ASSERT_EQ(a.hosts.size(), 2u);
  EXPECT_TRUE(a.hosts[0].aligned);
  EXPECT_FALSE(a.hosts[1].aligned);
  EXPECT_EQ(a.hosts[1].offset_ns, 0);
}

constexpr char kFwd[] =
    "forward@/src/model.py:120;train_step@/src/train.py:42;main@/src/train.py:300";
constexpr char kBwd[] =
    "backward@/src/model.py:160;train_step@/src/train.py:47;main@/src/train.py:300";
constexpr char kAr[] =
    "allreduce_grads@/src/ddp.py:88;train_step@/src/train.py:49;main@/src/train.py:300";

// "event name|stack" -> events of `ranks` ranks of a synthetic job.
std::map<std::string, uint64_t> ExpectedCallsiteArgs(const SyntheticJob& j, uint64_t ranks) {
  const uint64_t per_kind = ranks * j.steps * (j.layers / 2);
  return {{std::string("cublasGemmEx 4096x2048x1024|") + kFwd, per_kind},
          {std::string("cublasGemmEx 4096x2048x1024|") + kBwd, per_kind},
          {std::string("allreduce 32.0 MiB|") + kAr, ranks * j.steps}};
}

class TraceFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_.ranks = 8;
    job_.ranks_per_host = 4;
    job_.steps = 12;
    job_.host_offsets_ns = {0, 4000000};
    job_.exited_rank = 6;
    dumps_ = Dumps(job_);
    dir_ = TempDir();
    DumpContext ctx;
    ctx.job = job_.job;
    absl::StatusOr<DumpOutputs> o = WriteDumpOutputs(dir_, dumps_, TraceFormat::kBoth, ctx);
    ASSERT_TRUE(o.ok()) << o.status();
    out_ = *o;
  }
  SyntheticJob job_;
  std::vector<RankDump> dumps_;
  std::string dir_;
  DumpOutputs out_;
};

TEST_F(TraceFilesTest, PerfettoTraceIsValidAndComplete) {
  testing::ValidatedTrace v = testing::ValidatePerfettoFile(out_.perfetto_path);
  ASSERT_TRUE(v.ok()) << v.ErrorText();
  // Call-site links are not drawn (their launches carry the stack); step
  // markers are the only zero-length events.
  const uint64_t links = job_.steps * (job_.layers + 1);
  const uint64_t drawn = SyntheticOpsPerRank(job_) - links;
  const uint64_t markers = job_.steps;
  EXPECT_EQ(v.processes, 8u);
  EXPECT_EQ(v.slices, 8 * (drawn - markers));
  EXPECT_EQ(v.instants, 8 * markers);
  EXPECT_EQ(v.flows, static_cast<uint64_t>(job_.steps));  // one AllReduce instance per step
  EXPECT_EQ(v.slices_by_name["allreduce 32.0 MiB"], 8u * job_.steps);
  EXPECT_EQ(v.slices_by_name["cublasGemmEx 4096x2048x1024"], 8u * job_.steps * job_.layers);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(v.events_by_pid[r + 1], drawn) << "rank " << r;
  // Every GEMM and AllReduce carries its exact stack.
  EXPECT_EQ(v.callsites, ExpectedCallsiteArgs(job_, 8));
  EXPECT_NE(v.process_names[7].find("exited"), std::string::npos) << v.process_names[7];
  EXPECT_EQ(v.process_names[1].find("exited"), std::string::npos);
  // Aligned: node1's 4 ms offset is removed (to within the estimate's
  // error), so every rank starts at t0; unaligned it would start 4 ms late.
  EXPECT_NEAR(static_cast<double>(v.min_ts), static_cast<double>(job_.t0_ns), 5000.0);
  EXPECT_LT(v.max_ts - v.min_ts, job_.steps * 2000000ull);
  EXPECT_EQ(out_.perfetto.slices, v.slices);
  EXPECT_EQ(out_.perfetto.bytes, ReadFile(out_.perfetto_path).size());
}

TEST_F(TraceFilesTest, ChromeJsonIsValidAndComplete) {
  testing::ValidatedTrace v = testing::ValidateChromeJsonFile(out_.json_path);
  ASSERT_TRUE(v.ok()) << v.ErrorText();
  const uint64_t drawn = SyntheticOpsPerRank(job_) - job_.steps * (job_.layers + 1);
  EXPECT_EQ(v.processes, 8u);
  EXPECT_EQ(v.slices + v.instants, 8 * drawn);
  EXPECT_EQ(v.flows, static_cast<uint64_t>(job_.steps));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(v.events_by_pid[r + 1], drawn);
  EXPECT_EQ(v.callsites, ExpectedCallsiteArgs(job_, 8));
}

TEST_F(TraceFilesTest, ManifestReportsOffsetsAndFlameGraphIsWritten) {
  const std::string m = ReadFile(out_.manifest_path);
  EXPECT_NE(m.find("\"host\":\"node1\",\"offset_ns\":"), std::string::npos) << m;
  EXPECT_NEAR(static_cast<double>(out_.clock.OffsetFor("node1")), 4000000.0, 5000.0);
  ASSERT_FALSE(out_.svg_path.empty());
  const std::string svg = ReadFile(out_.svg_path);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("#f28e2b"), std::string::npos);  // GEMM colour
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST_F(TraceFilesTest, ValidatorRejectsBrokenTraces) {
  // Truncated file: not a valid message, or unbalanced slices.
  std::string data = ReadFile(out_.perfetto_path);
  const std::string cut = dir_ + "/cut.perfetto-trace";
  {
    std::ofstream f(cut, std::ios::binary);
    f << data.substr(0, data.size() - 7);
  }
  EXPECT_FALSE(testing::ValidatePerfettoFile(cut).ok());
  // A packet whose event names an undeclared track.
  ProtoEncoder te, pkt, top;
  te.Varint(9, 1);
  te.Varint(11, 999999);
  te.Bytes(23, "stray");
  pkt.Varint(8, 1);
  pkt.Message(11, te);
  top.Message(1, pkt);
  const std::string stray = dir_ + "/stray.perfetto-trace";
  {
    std::ofstream f(stray, std::ios::binary);
    f << data << top.data();
  }
  testing::ValidatedTrace v = testing::ValidatePerfettoFile(stray);
  EXPECT_FALSE(v.ok());
  // JSON: a complete event without dur.
  const std::string bad = dir_ + "/bad.json";
  {
    std::ofstream f(bad);
    f << R"({"traceEvents":[{"name":"x","ph":"X","ts":1,"pid":1,"tid":1}]})";
  }
  EXPECT_FALSE(testing::ValidateChromeJsonFile(bad).ok());
}

TEST(FlameGraphTest, StacksLinkExactlyToTheirLaunches) {
  SyntheticJob j;
  j.ranks = 4;
  j.steps = 5;
  CallsiteStats st;
  auto stacks = BuildCallsiteStacks(Dumps(j), CallsiteOptions(), &st);
  const uint64_t samples = 4ull * 5 * (j.layers + 1);
  EXPECT_EQ(st.samples, samples);
  EXPECT_EQ(st.linked_exact, samples);
  EXPECT_EQ(st.linked_nearby, 0u);
  EXPECT_EQ(st.unlinked, 0u);
  ASSERT_EQ(stacks.size(), 3u);
  const std::string fwd =
      "main@/src/train.py:300;train_step@/src/train.py:42;forward@/src/model.py:120;"
      "[gemm] cublasGemmEx 4096x2048x1024";
  ASSERT_EQ(stacks.count(fwd), 1u) << FoldedText(stacks);
  EXPECT_EQ(stacks[fwd].samples, 4ull * 5 * j.layers / 2);
  EXPECT_EQ(stacks[fwd].weight, 4ull * 5 * j.layers / 2 * 100000);  // GEMM GPU time
  EXPECT_EQ(stacks[fwd].kind, FrameKind::kGemm);
  const std::string ar =
      "main@/src/train.py:300;train_step@/src/train.py:49;allreduce_grads@/src/ddp.py:88;"
      "[allreduce] allreduce 32.0 MiB";
  ASSERT_EQ(stacks.count(ar), 1u) << FoldedText(stacks);
  EXPECT_EQ(stacks[ar].samples, 4ull * 5);
  EXPECT_EQ(stacks[ar].kind, FrameKind::kCollective);
  EXPECT_GE(stacks[ar].weight, 4ull * 5 * 300000);  // each AllReduce lasts >= 300 us
  const std::string folded = FoldedText(stacks);
  EXPECT_NE(folded.find(fwd + " " + std::to_string(4ull * 5 * j.layers / 2 * 100000) + "\n"),
            std::string::npos);
  const std::string svg = FlameGraphSvg(stacks, "t");
  EXPECT_NE(svg.find("#f28e2b"), std::string::npos);  // GEMM
  EXPECT_NE(svg.find("#4e79a7"), std::string::npos);  // collective
  EXPECT_NE(svg.find("<title>backward@/src/model.py:160"), std::string::npos);
}

// Rewrites every call-site record of rank 0 with `edit`.
template <typename Edit>
void EditCallsiteRecords(std::vector<RankDump>* d, Edit edit) {
  RankDump& r0 = (*d)[0];
  for (size_t i = 0; i < r0.size(); ++i) {
    xpu_record_v1 r = r0.Record(i);
    if (r0.sigs[r.sig_id].kind != XPU_OP_PY_CALLSITE) continue;
    edit(&r);
    std::memcpy(r0.packed.data() + i * sizeof(r), &r, sizeof(r));
  }
}

TEST(FlameGraphTest, ALinkWhoseLaunchIsMissingIsNeverGuessed) {
  SyntheticJob j;
  j.ranks = 1;
  j.steps = 2;
  std::vector<RankDump> d = Dumps(j);
  // The launches' keys no longer match (as if they were overwritten).
  EditCallsiteRecords(&d, [](xpu_record_v1* r) { r->seq += 1000; });
  CallsiteOptions opt;
  opt.max_gap_ns = 1000000000;  // the fallback would reach every launch
  CallsiteStats st;
  auto stacks = BuildCallsiteStacks(d, opt, &st);
  EXPECT_EQ(st.samples, 2u * (j.layers + 1));
  EXPECT_EQ(st.linked_exact, 0u);
  EXPECT_EQ(st.linked_nearby, 0u);
  EXPECT_EQ(st.unlinked, st.samples);
  for (const auto& [key, f] : stacks) EXPECT_NE(key.find(";[unlinked]"), std::string::npos) << key;
}

TEST(FlameGraphTest, FreeStandingPythonEventsFallBackToLaunchTime) {
  SyntheticJob j;
  j.ranks = 1;
  j.steps = 2;
  std::vector<RankDump> d = Dumps(j);
  // As xputimer.emit_callsite() writes them: no launch key, a moment before
  // the launch they precede.
  EditCallsiteRecords(&d, [](xpu_record_v1* r) {
    r->issue_latency_ns = 0;
    r->start_ns -= 500;
  });
  CallsiteOptions opt;
  opt.max_gap_ns = 1000;
  CallsiteStats st;
  auto stacks = BuildCallsiteStacks(d, opt, &st);
  EXPECT_EQ(st.linked_exact, 0u);
  EXPECT_EQ(st.linked_nearby, st.samples);
  const std::string fwd =
      "main@/src/train.py:300;train_step@/src/train.py:42;forward@/src/model.py:120;"
      "[gemm] cublasGemmEx 4096x2048x1024";
  EXPECT_EQ(stacks[fwd].samples, 2ull * j.layers / 2) << FoldedText(stacks);
  opt.max_gap_ns = 0;
  stacks = BuildCallsiteStacks(d, opt, &st);
  EXPECT_EQ(st.unlinked, st.samples);
  ASSERT_EQ(stacks.size(), 3u);  // forward, backward, allreduce_grads
  for (const auto& [key, f] : stacks) {
    EXPECT_NE(key.find(";[unlinked]"), std::string::npos) << key;
    EXPECT_EQ(f.weight, f.samples * CallsiteOptions().unlinked_weight_ns);
  }
}

analysis::Op MakeOp(uint32_t sig, uint16_t kind, uint64_t start, uint32_t seq, uint16_t stream,
                    int32_t lat, uint16_t flags) {
  analysis::Op o;
  o.sig_id = sig;
  o.kind = kind;
  o.start_ns = start;
  o.seq = seq;
  o.stream = stream;
  o.issue_latency_ns = lat;
  o.flags = flags;
  return o;
}

TEST(CallsiteJoinTest, KeyIsSigSeqAndStreamNeverAPluginRecordNearestOnWrap) {
  analysis::RankTrace t;
  const uint16_t gpu = XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
  t.ops = {
      MakeOp(9, XPU_OP_PY_CALLSITE, 1000, 5, 2, 3, XPU_REC_HOST),  // 0 link -> 3
      MakeOp(3, XPU_OP_GEMM, 1100, 5, 1, 100, gpu),                // 1 other stream
      MakeOp(4, XPU_OP_GEMM, 1100, 5, 2, 100, gpu),                // 2 other sig
      MakeOp(3, XPU_OP_GEMM, 1200, 5, 2, 200, gpu),                // 3 the launch
      MakeOp(7, XPU_OP_ALLREDUCE, 1500, 1, 4, 0,
             XPU_REC_PLUGIN | XPU_REC_TIMED),                         // 4 plugin supplement
      MakeOp(8, XPU_OP_PY_CALLSITE, 1400, 1, 4, 7, XPU_REC_HOST),     // 5 link -> 6
      MakeOp(7, XPU_OP_ALLREDUCE, 1400, 1, 4, 0, XPU_REC_NOT_TIMED),  // 6 occurrence
      MakeOp(9, XPU_OP_PY_CALLSITE, 90000, 5, 2, 3, XPU_REC_HOST),    // 7 seq wrapped -> 8
      MakeOp(3, XPU_OP_GEMM, 90100, 5, 2, 100, gpu),                  // 8
      MakeOp(9, XPU_OP_PY_CALLSITE, 95000, 6, 2, 3, XPU_REC_HOST),    // 9 launch missing
      MakeOp(9, XPU_OP_PY_CALLSITE, 96000, 6, 2, 0, XPU_REC_HOST),    // 10 free-standing
  };
  const CallsiteJoin j = JoinCallsites(t);
  EXPECT_EQ(j.links, 4u);
  EXPECT_EQ(j.joined, 3u);
  EXPECT_EQ(j.launch_of[0], 3u);
  EXPECT_EQ(j.launch_of[5], 6u);
  EXPECT_EQ(j.launch_of[7], 8u);
  EXPECT_EQ(j.launch_of[9], CallsiteJoin::kNone);
  EXPECT_EQ(j.launch_of[10], CallsiteJoin::kNone);
  EXPECT_EQ(j.stack_of[3], 9u);
  EXPECT_EQ(j.stack_of[6], 8u);
  EXPECT_EQ(j.stack_of[8], 9u);
  for (size_t i : {1, 2, 4}) EXPECT_EQ(j.stack_of[i], 0u) << i;
  EXPECT_FALSE(IsCallsiteLink(t.ops[10]));
}

TEST(FlameGraphTest, CallsiteNames) {
  EXPECT_TRUE(IsCallsiteName("f@a.py:1;g@b.py:2"));
  EXPECT_FALSE(IsCallsiteName("my region"));
  EXPECT_FALSE(IsCallsiteName("f@a.py:1;plain"));
}

TEST(SummaryTest, FiguresOnTheDumpedWindow) {
  SyntheticJob j;
  j.ranks = 4;
  j.ranks_per_host = 2;
  j.steps = 8;
  j.host_offsets_ns = {0, 2500000};
  std::vector<RankDump> d = Dumps(j);
  TimelineSummary s = Summarize(d, EstimateClockOffsets(d));
  ASSERT_EQ(s.ranks.size(), 4u);
  ASSERT_FALSE(s.top.empty());
  // Per step: 4 x 100 us GEMM > ~345 us AllReduce > 190 us DataLoader.
  EXPECT_EQ(s.top[0].kind, "gemm");
  EXPECT_EQ(s.top[1].kind, "allreduce");
  EXPECT_EQ(s.top[1].count, 4u * 8);
  uint64_t gemm_count = 0;
  for (const SignatureTime& t : s.top) {
    if (t.kind == "gemm") gemm_count = t.count;
  }
  EXPECT_EQ(gemm_count, 4u * 8 * j.layers);
  for (const RankSummary& r : s.ranks) {
    EXPECT_EQ(r.step_source, "step markers");
    EXPECT_EQ(r.steps, 7u);  // 8 markers bound 7 complete steps
    // 2*4096*2048*1024 flop / 100 us = 171.8 TFLOPS.
    EXPECT_NEAR(r.gemm_tflops, 171.8, 0.1);
    EXPECT_NEAR(r.compute_s, 8 * j.layers * 120e-6, 1e-9);
  }
  // Step time is the synthetic step length on every rank: equal steps.
  EXPECT_NEAR(s.ranks[0].step_mean_ms, s.ranks[3].step_mean_ms, 1e-6);
  ASSERT_FALSE(s.comms.empty());
  EXPECT_EQ(s.comms[0].op, "allreduce");
  EXPECT_GT(s.comms[0].busbw_GBps, 0);
  const std::string js = SummaryJson(s);
  EXPECT_NE(js.find("\"step_source\":\"step markers\""), std::string::npos);
  EXPECT_NE(SummaryText(s).find("Top signatures by time"), std::string::npos);
}

TEST(RankDumpTest, RawRoundTripKeepsPackedRecords) {
  SyntheticJob j;
  j.ranks = 3;
  j.steps = 2;
  j.exited_rank = 1;
  const std::string dir = TempDir();
  uint64_t bytes = 0;
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<uint64_t> b = WriteRaw(dir, SyntheticRank(j, r));
    ASSERT_TRUE(b.ok());
    bytes += *b;
  }
  absl::StatusOr<std::vector<RankDump>> back = ReadRawDir(dir);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_TRUE((*back)[1].exited);
  EXPECT_EQ((*back)[2].size(), SyntheticOpsPerRank(j));
  EXPECT_EQ((*back)[2].packed, SyntheticRank(j, 2).records());
  EXPECT_FALSE(ReadRawDir(dir + "/nope").ok());
  xpu::v1::ProcessBatch bad = SyntheticRank(j, 0);
  bad.mutable_records()->push_back('x');
  EXPECT_FALSE(FromProcessBatch(bad).ok());
}

}  // namespace
}  // namespace xpu::timeline
