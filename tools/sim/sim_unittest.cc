// Unit tests of xpu-sim's parts: fault and layout parsing, the model's
// records and hang state, the evidence it answers with, the judge. The
// simulator against a real engine: tests/scale/sim_e2e_test.py.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"
#include "tools/sim/cluster_model.h"
#include "tools/sim/evidence.h"
#include "tools/sim/fault.h"
#include "tools/sim/judge.h"
#include "tools/sim/sim_flags.h"

namespace xpu::sim {
namespace {

TEST(FaultTest, ParsesKindRanksAndWindow) {
  absl::StatusOr<FaultSpec> f = ParseFault("slow_gpu:3,8-10:4", 16);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, FaultKind::kSlowGpu);
  EXPECT_EQ(f->ranks, (std::vector<int32_t>{3, 8, 9, 10}));
  EXPECT_EQ(f->at_window, 4);
  f = ParseFault("gc:5", 16);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->at_window, 2);
  EXPECT_EQ(RankListString({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

TEST(FaultTest, RefusesBadSpecs) {
  EXPECT_FALSE(ParseFault("slow_gpu", 8).ok());
  EXPECT_FALSE(ParseFault("fast_gpu:1", 8).ok());
  EXPECT_FALSE(ParseFault("slow_gpu:8", 8).ok());
  EXPECT_FALSE(ParseFault("slow_gpu:3-1", 8).ok());
  EXPECT_FALSE(ParseFault("slow_gpu:1:x", 8).ok());
  EXPECT_FALSE(ParseFault("slow_gpu:1:-1", 8).ok());
}

TEST(FaultTest, HangNamesBothEndsOfTheLink) {
  FaultSpec f;
  f.kind = FaultKind::kHang;
  f.ranks = {7};
  Expectation e = ExpectationFor(f, [](int32_t r) { return (r + 1) % 8; });
  EXPECT_EQ(e.ranks, (std::vector<int32_t>{0, 7}));
  EXPECT_EQ(e.team, "operations");  // the located link (docs/hang-diagnosis.md)
  f.kind = FaultKind::kPython;
  e = ExpectationFor(f, [](int32_t r) { return r + 1; });
  EXPECT_EQ(e.ranks, (std::vector<int32_t>{7}));
  EXPECT_EQ(e.team, "algorithm");
}

TEST(LayoutTest, Parses) {
  absl::StatusOr<Layout> l = ParseLayout("tp8pp4", 256, 8);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->tp, 8);
  EXPECT_EQ(l->pp, 4);
  EXPECT_TRUE(ParseLayout("dp", 10, 8)->data_parallel_only());
  EXPECT_FALSE(ParseLayout("tp16pp2", 64, 8).ok());  // a TP group must fit in a host
  EXPECT_FALSE(ParseLayout("tp8pp3", 64, 8).ok());   // 64 is not a multiple of 24
  EXPECT_FALSE(ParseLayout("pp4", 64, 8).ok());
}

ModelSpec Spec(int32_t ranks, const std::string& layout, TimingPolicy timing) {
  ModelSpec s;
  s.ranks = ranks;
  s.ranks_per_host = 8;
  s.layout = *ParseLayout(layout, ranks, 8);
  s.timing = timing;
  s.steps_per_window = 3;
  return s;
}

// Per (comm_id, seq) the members that reported a collective, from the
// signatures of every rank.
std::map<std::pair<uint64_t, uint32_t>, std::set<int32_t>> Collectives(const ClusterModel& m) {
  std::map<std::pair<uint64_t, uint32_t>, std::set<int32_t>> out;
  for (int32_t r = 0; r < m.ranks(); ++r) {
    xpu::v1::ProcessBatch pb;
    m.AppendSignatures(r, &pb);
    std::map<uint32_t, xpu::v1::Signature> sigs;
    for (const auto& s : pb.signatures()) sigs[s.id()] = s;
    for (const xpu_record_v1& rec : m.Records(r)) {
      const xpu::v1::Signature& s = sigs.at(rec.sig_id);
      if (s.kind() == XPU_OP_ALLREDUCE && (rec.flags & XPU_REC_TIMED))
        out[{s.comm_id(), rec.seq}].insert(r);
    }
  }
  return out;
}

TEST(ClusterModelTest, EveryMemberReportsEachAllReduce) {
  for (const std::string layout : {"dp", "tp4pp2"}) {
    ClusterModel m(Spec(32, layout, TimingPolicy::kAll));
    m.RunWindow(0, 1000000000000ull);
    EXPECT_EQ(m.steps_done(), 3u);
    auto colls = Collectives(m);
    ASSERT_FALSE(colls.empty());
    for (const auto& [key, members] : colls) {
      // dp: the world and the host groups; tp4pp2: TP groups of 4, DP groups of 4.
      EXPECT_TRUE(members.size() == 32 || members.size() == 8 || members.size() == 4)
          << layout << " comm " << key.first << " seq " << key.second << ": " << members.size();
    }
  }
}

TEST(ClusterModelTest, SampledPolicyDoublesCollectivesAndSamplesGemms) {
  ClusterModel all(Spec(8, "dp", TimingPolicy::kAll));
  ClusterModel sampled(Spec(8, "dp", TimingPolicy::kSampled));
  for (int w = 0; w < 4; ++w) {
    all.RunWindow(w, 1000000000000ull);
    sampled.RunWindow(w, 1000000000000ull);
  }
  size_t plugin = 0, not_timed = 0, timed_gemm = 0;
  for (const xpu_record_v1& r : sampled.Records(0)) {
    plugin += (r.flags & XPU_REC_PLUGIN) != 0;
    not_timed += (r.flags & XPU_REC_NOT_TIMED) != 0;
    timed_gemm += (r.flags & XPU_REC_SAMPLED) != 0;
  }
  EXPECT_GT(plugin, 0u);
  EXPECT_GT(not_timed, plugin);  // every collective's occurrence, plus unsampled GEMMs
  EXPECT_GT(timed_gemm, 0u);
  EXPECT_GT(sampled.Records(0).size(), all.Records(0).size());
}

TEST(ClusterModelTest, SlowGpuMakesGemmsLonger) {
  ModelSpec s = Spec(8, "dp", TimingPolicy::kAll);
  s.faults.push_back(*ParseFault("slow_gpu:3:0", 8));
  ClusterModel m(s);
  m.RunWindow(0, 1000000000000ull);
  auto gemm_ns = [&](int32_t r) {
    uint64_t ns = 0;
    for (const xpu_record_v1& rec : m.Records(r)) ns += rec.sig_id == 1 ? rec.duration : 0;
    return ns;
  };
  EXPECT_GT(gemm_ns(3), 1.8 * gemm_ns(2));
}

// A rank's trace of the model's latest window, as the engine's view reads
// it (kinds from the rank's signatures).
analysis::RankTrace TraceOf(const ClusterModel& m, int32_t r) {
  xpu::v1::ProcessBatch pb;
  m.AppendSignatures(r, &pb);
  analysis::RankTrace t;
  t.rank = r;
  for (const xpu::v1::Signature& sig : pb.signatures()) {
    analysis::OpSig& os = t.sigs[sig.id()];
    os.kind = static_cast<uint16_t>(sig.kind());
    os.comm_id = sig.comm_id();
    os.comm_rank = sig.comm_rank();
    os.comm_nranks = sig.comm_nranks();
  }
  for (const xpu_record_v1& rec : m.Records(r))
    t.ops.push_back(analysis::OpFromRecord(rec, t.sigs[rec.sig_id].kind));
  t.Sort();
  return t;
}

// Under the hook's sampled policy most GEMM occurrences are not GPU-timed.
// They are traced work: a healthy rank whose compute stream queues up while
// it waits for a slow peer must not show them as untraced ("minority")
// kernel time. (Counted so, V_minority rose from 2 % to 12 % on every
// peer of a slow GPU and named thousands of ranks at 100k.)
TEST(ClusterModelTest, UntimedOccurrencesAreNotMinorityTimeBesideASlowPeer) {
  double vmin[2][4];
  for (TimingPolicy policy : {TimingPolicy::kAll, TimingPolicy::kSampled}) {
    ModelSpec s = Spec(64, "dp", policy);
    s.steps_per_window = 60;
    s.faults.push_back(*ParseFault("slow_gpu:37:2", 64));
    ClusterModel m(s);
    for (int w = 0; w < 4; ++w) {
      m.RunWindow(w, 1000000000000ull + static_cast<uint64_t>(w) * 30000000000ull);
      const analysis::RankTrace t = TraceOf(m, 0);
      const analysis::VoidFigures v = analysis::ComputeVoid(t, analysis::FindSteps(t));
      ASSERT_GT(v.steps, 50u);
      vmin[policy == TimingPolicy::kSampled][w] = v.VMinority();
    }
  }
  for (int w = 0; w < 4; ++w) {
    EXPECT_GT(vmin[0][w], 0.005) << "window " << w;  // the model's untraced kernels
    EXPECT_LE(vmin[1][w], vmin[0][w]) << "window " << w;
  }
}

TEST(ClusterModelTest, PythonHangLeavesTheCulpritOutOfTheCollective) {
  ModelSpec s = Spec(16, "dp", TimingPolicy::kSampled);
  s.faults.push_back(*ParseFault("python:5:1", 16));
  ClusterModel m(s);
  m.RunWindow(0, 1000000000000ull);
  m.RunWindow(1, 2000000000000ull);
  ASSERT_TRUE(m.hang().active);
  EXPECT_EQ(m.Role(5), HangRole::kInPython);
  EXPECT_EQ(m.Role(4), HangRole::kWaiting);
  const uint64_t later = m.hang().since_ns + 20000000000ull;
  xpu::v1::HangProgress p4, p5;
  m.FillProgress(4, later, 5000000000ull, &p4);
  m.FillProgress(5, later, 5000000000ull, &p5);
  EXPECT_TRUE(p4.suspect());
  EXPECT_FALSE(p5.suspect());
  EXPECT_EQ(p4.comms(0).pending_seq(), m.hang().seq);
  EXPECT_LT(p5.comms(0).last_issued_seq(), m.hang().seq);
  m.RunWindow(2, 3000000000000ull);
  EXPECT_TRUE(m.Records(4).empty());
  xpu::v1::ProcessEvidence e = MakeEvidence(m, 5, later, 5000000000ull);
  EXPECT_NE(e.python_stacks().find("wait_for_shard"), std::string::npos);
}

TEST(ClusterModelTest, CollectiveHangStallsTheRingAfterTheCulprit) {
  ModelSpec s = Spec(8, "dp", TimingPolicy::kSampled);
  s.faults.push_back(*ParseFault("hang:2:0", 8));
  ClusterModel m(s);
  m.RunWindow(0, 1000000000000ull);
  ASSERT_TRUE(m.hang().active);
  for (int32_t r = 0; r < 8; ++r) {
    xpu::v1::ProcessEvidence e = MakeEvidence(m, r, m.hang().since_ns + 1, 1);
    ASSERT_EQ(e.kernel_size(), 1) << r;
    EXPECT_EQ(e.kernel(0).step(), r == 3 ? 0u : 2u) << r;
  }
  xpu::v1::Command c;
  c.set_kind("evidence");
  c.set_job("xpu-sim");
  xpu::v1::CommandReply reply = AnswerCommand(m, 0, c, m.hang().since_ns, 1);
  ASSERT_TRUE(reply.ok());
  xpu::v1::EvidenceReply ev;
  ASSERT_TRUE(ev.ParseFromString(reply.payload()));
  EXPECT_EQ(ev.processes_size(), 8);
  c.set_kind("nonsense");
  EXPECT_FALSE(AnswerCommand(m, 0, c, 0, 1).ok());
}

TEST(JudgeTest, FoundInTimeAndUnexpected) {
  std::vector<FaultSpec> faults = {*ParseFault("slow_gpu:3:2", 8)};
  const uint64_t w0 = 1000, wn = 10;
  DiagnosisSeen right{"slow_gpu", "rank:3", "operations", "warning", {3}, 1, w0 + 40, true, ""};
  DiagnosisSeen symptom{"throughput_regression", "job", "operations", "warning", {0, 1}, 1, w0 + 40, true, ""};
  DiagnosisSeen wrong{"slow_gpu", "rank:4", "operations", "warning", {4}, 1, w0 + 40, true, ""};
  auto next = [](int32_t r) { return r + 1; };
  Judgement j = Judge(faults, next, {right, symptom}, w0, wn, 2);
  EXPECT_TRUE(j.ok);
  ASSERT_EQ(j.faults.size(), 1u);
  EXPECT_EQ(j.faults[0].windows, 2);
  j = Judge(faults, next, {right, wrong}, w0, wn, 2);
  EXPECT_FALSE(j.ok);
  EXPECT_EQ(j.unexpected.size(), 1u);
  right.first_seen_ns = w0 + 50;  // three windows after the fault
  EXPECT_FALSE(Judge(faults, next, {right}, w0, wn, 2).ok);
  // Healthy: any diagnosis is unexpected.
  EXPECT_TRUE(Judge({}, next, {}, w0, wn, 2).ok);
  EXPECT_FALSE(Judge({}, next, {symptom}, w0, wn, 2).ok);
}

TEST(SimFlagsTest, HelpUsageAndFaults) {
  std::ostringstream out, err;
  ParsedFlags p = ParseSimFlags({"--help"}, out, err);
  EXPECT_TRUE(p.exit_now);
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(out.str().find("--fault"), std::string::npos);
  EXPECT_NE(out.str().find("mismatch"), std::string::npos);
  p = ParseSimFlags({"--ranks", "16", "--fault", "slow_gpu:99"}, out, err);
  EXPECT_TRUE(p.exit_now);
  EXPECT_EQ(p.exit_code, 2);
  p = ParseSimFlags({"--ranks", "16", "--fault", "stop:1", "--fault", "python:2"}, out, err);
  EXPECT_EQ(p.exit_code, 2);
  p = ParseSimFlags({"--ranks", "64", "--layout", "tp8pp2", "--fault", "gc:3:1", "--windows", "4"},
                    out, err);
  ASSERT_FALSE(p.exit_now) << err.str();
  EXPECT_EQ(p.options.model.layout.pp, 2);
  EXPECT_EQ(p.options.model.faults.size(), 1u);
}

}  // namespace
}  // namespace xpu::sim

