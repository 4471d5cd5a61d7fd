// The window view every slowdown detector reads.
#include "engine/window/window_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "engine/testing/detector_testing.h"

namespace xpu::engine {
namespace {

using ::testing::ElementsAre;
using namespace testing;  // NOLINT: xpu::engine::testing, the job builder

std::vector<uint64_t> Starts(const analysis::RankTrace& t) {
  std::vector<uint64_t> out;
  for (const analysis::Op& op : t.ops) out.push_back(op.start_ns);
  return out;
}

TEST(WindowViewTest, EachWindowSeesTheRecordsThatArrivedSinceTheLast) {
  TestJob job;
  job.Rank(1, "node-b");
  job.Rank(0, "node-a");
  job.Define(0, GemmSig(1, 64, 64, 64));
  job.Define(1, KernelSig(1, "softmax"));
  // Out of order, and one record whose signature the rank never defined.
  job.Add(0, {Timed(1, 3000, 10), Timed(1, 1000, 10), Timed(7, 2000, 10)});
  job.Add(1, Timed(1, 1500, 20));
  job.CloseWindow();
  WindowViews views;
  const WindowView& v = views.Get(job);
  EXPECT_EQ(v.window_id, job.state().window_start_ns());
  EXPECT_EQ(v.backbone, "gpt");
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].rank, 0);  // by rank
  EXPECT_EQ(v.ranks[0].host, "node-a");
  EXPECT_THAT(Starts(v.ranks[0]), ElementsAre(1000, 3000));  // sorted; sig 7 dropped
  EXPECT_EQ(v.ranks[0].Sig(1)->m, 64u);
  EXPECT_EQ(v.ranks[1].Sig(1)->name, "softmax");
  EXPECT_EQ(v.records, 3u);
  EXPECT_EQ(v.first_ns, 1000u);
  EXPECT_EQ(v.last_ns, 3010u);
  EXPECT_EQ(v.HostOf(1), "node-b");
  EXPECT_EQ(v.HostOf(9), "");
  EXPECT_THAT(HostsOf(v, {1, 0, 9}), ElementsAre("node-a", "node-b"));
  // Asked again within the window: the same view, built once.
  EXPECT_EQ(&views.Get(job), &v);

  // Next window: only the new record, and only the rank that sent one.
  job.Add(1, Timed(1, 5000, 20));
  job.CloseWindow();
  const WindowView& w = views.Get(job);
  ASSERT_EQ(w.ranks.size(), 1u);
  EXPECT_EQ(w.ranks[0].rank, 1);
  EXPECT_THAT(Starts(w.ranks[0]), ElementsAre(5000));

  // Nothing new: an empty view.
  job.CloseWindow();
  EXPECT_TRUE(views.Get(job).ranks.empty());
  EXPECT_EQ(views.Get(job).first_ns, 0u);
}

TEST(WindowViewTest, BuildAndTrimLeavesEachRingItsTailAndTheSameView) {
  TestJob job;
  job.Define(0, KernelSig(1, "k"));
  job.Define(1, KernelSig(1, "k"));
  std::vector<xpu_record_v1> recs;
  for (uint64_t i = 0; i < 200; ++i) recs.push_back(Timed(1, 1000 + 10 * i, 5, i));
  job.Add(0, recs);
  job.Add(1, recs);
  job.CloseWindow();
  WindowViews views;
  const WindowView& v = views.BuildAndTrim(job.state(), /*keep=*/16, /*pace_keep=*/64);
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].ops.size(), 200u);  // every record of the window, copied first
  EXPECT_EQ(v.ranks[1].ops.size(), 200u);
  EXPECT_EQ(v.records, 400u);
  const RecordRing& pace = job.state().processes().at("rank:0")->ring;  // lowest rank
  const RecordRing& other = job.state().processes().at("rank:1")->ring;
  constexpr size_t kChunk = RecordRing::kChunkRecords;
  EXPECT_EQ(pace.held(), 64u);
  EXPECT_LT(pace.allocated(), 64u + 2 * kChunk);
  EXPECT_EQ(other.held(), 16u);
  EXPECT_LT(other.allocated(), 16u + 2 * kChunk);
  EXPECT_EQ(other.Last(1).back().seq, 199u);  // the newest stay
  // The detectors' Get returns the view built; the tick's TrimRings after it
  // changes nothing: the next window's records take their own room, the
  // view's records meanwhile still held.
  EXPECT_EQ(&views.Get(job), &v);
  job.state().TrimRings(16, 64);
  EXPECT_EQ(other.held(), 16u);
  job.Add(1, Timed(1, 9000, 5, 200));
  EXPECT_EQ(other.held(), 17u);
  EXPECT_LT(other.allocated(), 17u + 2 * kChunk);
  // Next window: only what came since, for the rank that sent it.
  job.CloseWindow();
  const WindowView& w = views.BuildAndTrim(job.state(), 16, 64);
  ASSERT_EQ(w.ranks.size(), 1u);
  EXPECT_EQ(w.ranks[0].rank, 1);
  EXPECT_THAT(Starts(w.ranks[0]), ElementsAre(9000));
  EXPECT_LT(other.allocated(), 16u + 2 * kChunk);
}

// Built on several threads (a part per 1,024+ ranks), the view is the one
// built on one: the same ranks in order, the same ops and signatures, every
// ring trimmed.
TEST(WindowViewTest, BuiltInPartsOnSeveralThreadsIsTheSameView) {
  TestJob one, four;
  for (TestJob* job : {&one, &four}) {
    for (int32_t r = 2999; r >= 0; --r) {  // created out of rank order
      job->Define(r, KernelSig(1, "k"));
      job->Define(r, GemmSig(2, 64, 64, 64));
      std::vector<xpu_record_v1> recs;
      for (uint32_t i = 0; i < 40; ++i) {
        // Out of order within the rank: sorted in the view.
        recs.push_back(Timed(1 + i % 2, 100000 * r + 1000 * (40 - i), 5 + r % 7, i));
      }
      job->Add(r, recs);
    }
    job->CloseWindow();
  }
  WindowViews v1, v4;
  const WindowView& a = v1.BuildAndTrim(one.state(), 16, 64, 1);
  const WindowView& b = v4.BuildAndTrim(four.state(), 16, 64, 4);
  ASSERT_EQ(a.ranks.size(), 3000u);
  ASSERT_EQ(b.ranks.size(), a.ranks.size());
  EXPECT_EQ(b.records, a.records);
  EXPECT_EQ(b.records, 3000u * 40);
  EXPECT_EQ(b.first_ns, a.first_ns);
  EXPECT_EQ(b.last_ns, a.last_ns);
  EXPECT_EQ(b.identities.size(), 3000u);
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    ASSERT_EQ(b.ranks[i].rank, static_cast<int32_t>(i));
    EXPECT_EQ(Starts(b.ranks[i]), Starts(a.ranks[i])) << i;
    EXPECT_EQ(b.ranks[i].sigs.size(), 2u) << i;
    EXPECT_EQ(b.ranks[i].Sig(2)->m, 64u) << i;
    // The ranks' alike signatures are one copy (one per thread's part).
    EXPECT_EQ(a.ranks[i].Sig(2), a.ranks[0].Sig(2)) << i;
    EXPECT_EQ(a.ranks[i].Sig(1), a.ranks[0].Sig(1)) << i;
  }
  std::set<const analysis::OpSig*> copies;
  for (const analysis::RankTrace& t : b.ranks) copies.insert(t.Sig(2));
  EXPECT_LE(copies.size(), 4u);
  for (const auto& [key, p] : four.state().processes()) {
    EXPECT_EQ(p->ring.held(), p->identity.rank() == 0 ? 40u : 16u) << key;
  }
}

// A record that ended well before the window being filled began came after
// its own window was analysed: counted late, once, in the window it joins.
// Not so a record near the boundary (a daemon flushes every second), nor
// the backlog of a process first seen in this window.
TEST(WindowViewTest, RecordsOfAnAnalysedWindowAreCountedLate) {
  TestJob job;
  job.Define(0, KernelSig(1));
  job.Add(0, Timed(1, TestJob::kStartNs + 1 * kSec, 10));
  job.CloseWindow();                                        // [start, start + 60 s)
  job.Add(0, Timed(1, TestJob::kStartNs + 30 * kSec, 10));  // late
  job.Add(0, Timed(1, TestJob::kStartNs + 59 * kSec, 10));  // within the slack
  job.Add(0, Timed(1, TestJob::kStartNs + 61 * kSec, 10));  // in this window
  job.Define(1, KernelSig(1));                              // a new process
  job.Add(1, Timed(1, TestJob::kStartNs + 30 * kSec, 10));  // its backlog
  const WindowSummaryRow row = job.state().CloseWindow(job.now() + 60 * kSec);
  EXPECT_EQ(row.records, 4u);
  EXPECT_EQ(row.late_records, 1u);
  EXPECT_EQ(job.state().CloseWindow(job.now() + 120 * kSec).late_records, 0u);
}

// Cut at the window's end: a rank's records from the first that started at
// or after it stay in its ring for the next window, however small the tail
// the ring keeps; a record from a clock a window ahead does not stop it.
TEST(WindowViewTest, RecordsAfterTheCutWaitForTheNextWindow) {
  TestJob job;
  job.Define(0, KernelSig(1));
  job.Define(1, KernelSig(1));
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 30; ++i) recs.push_back(Timed(1, 1000 + 100 * i, 5, i));
  job.Add(0, recs);                   // starts 1000 .. 3900
  job.Add(1, Timed(1, 500, 5, 0));    // before the cut
  job.Add(1, Timed(1, 90000, 5, 1));  // a clock a window ahead: not waited for
  job.Add(1, Timed(1, 800, 5, 2));
  job.CloseWindow();
  WindowViews views;
  const WindowView& v =
      views.BuildAndTrim(job.state(), /*keep=*/4, /*pace_keep=*/4, 1, WindowCut{2000, 12000});
  ASSERT_EQ(v.ranks.size(), 2u);
  EXPECT_EQ(v.ranks[0].ops.size(), 10u);  // 1000 .. 1900
  EXPECT_EQ(v.ranks[0].ops.back().start_ns, 1900u);
  EXPECT_THAT(Starts(v.ranks[1]), ElementsAre(500, 800, 90000));
  EXPECT_EQ(v.records, 13u);
  // The ring kept the 20 held records, not its tail of 4.
  EXPECT_EQ(job.state().processes().at("rank:0")->ring.held(), 20u);
  EXPECT_EQ(job.state().processes().at("rank:1")->ring.held(), 3u);

  // Every record held: the rank is left out of the window, its records wait.
  job.Add(1, Timed(1, 13000, 5, 3));
  job.CloseWindow();
  const WindowView& w = views.BuildAndTrim(job.state(), 4, 4, 1, WindowCut{2500, 22500});
  ASSERT_EQ(w.ranks.size(), 1u);
  EXPECT_EQ(w.ranks[0].rank, 0);
  EXPECT_EQ(w.ranks[0].ops.size(), 5u);  // 2000 .. 2400
  EXPECT_EQ(w.identities.count(1), 0u);

  // The next window takes what was held.
  job.CloseWindow();
  const WindowView& x = views.BuildAndTrim(job.state(), 4, 4, 1, WindowCut{});
  ASSERT_EQ(x.ranks.size(), 2u);
  EXPECT_EQ(x.ranks[0].ops.size(), 15u);  // 2500 .. 3900
  EXPECT_THAT(Starts(x.ranks[1]), ElementsAre(13000));
}

TEST(WindowViewTest, RetainForgetsRetiredJobs) {
  TestJob job;
  job.Define(0, KernelSig(1));
  job.Add(0, Timed(1, 1000, 10));
  job.CloseWindow();
  WindowViews views;
  EXPECT_EQ(views.Get(job).records, 1u);
  // Forgotten: the cursor starts over, the same records are new again.
  views.Retain({"another-job"});
  EXPECT_EQ(views.Get(job).records, 1u);
  views.Retain({"job-1"});
  job.CloseWindow();
  EXPECT_EQ(views.Get(job).records, 0u);
}

// Steps of 10 kernels each on 600 ranks (enough for FindAll to use several
// threads): a GEMM then a 1 ms gap on odd ranks, 0.1 ms on even ones; an
// all-reduce of every rank per step.
TEST(WindowViewTest, EachRanksFiguresAreFoundOnceAndMatchTheAnalyses) {
  TestJob job;
  constexpr uint32_t kStep = 1, kGemm = 2, kAllReduce = 3;
  constexpr int kRanks = 600;
  for (int r = 0; r < kRanks; ++r) {
    job.Define(r, HostSig(kStep, XPU_OP_STEP));
    job.Define(r, GemmSig(kGemm, 1024, 1024, 1024));
    job.Define(r, CollSig(kAllReduce, XPU_OP_ALLREDUCE, 1 << 20, 7, r, kRanks));
    for (uint32_t s = 0; s < 4; ++s) {
      job.Add(r, Timed(kAllReduce, 2 * kSec + s * kSec + static_cast<uint64_t>(r) * kUs, kMs, s));
    }
    const uint64_t gap = r % 2 ? kMs : 100 * kUs;
    for (int i = 0; i < 40; ++i) {
      const uint64_t at = kSec + static_cast<uint64_t>(i) * (kMs + gap);
      if (i % 10 == 0) job.Add(r, Host(kStep, at, kUs, static_cast<uint32_t>(i / 10)));
      job.Add(r, Timed(kGemm, at, kMs, static_cast<uint32_t>(i + 1), 5 * kMs));
    }
    job.Add(r, Host(kStep, kSec + 40 * (kMs + gap), kUs, 4));
  }
  job.CloseWindow();
  WindowViews views;
  const WindowView& v = views.Get(job);
  ASSERT_EQ(v.ranks.size(), static_cast<size_t>(kRanks));
  v.FindAll(4);
  for (const int i : {0, 1, 299, 599}) {
    const analysis::RankTrace& t = v.ranks[static_cast<size_t>(i)];
    const analysis::Steps steps = analysis::FindSteps(t);
    EXPECT_EQ(v.StepsOf(t).DurationsS(), steps.DurationsS()) << "rank " << i;
    ASSERT_EQ(steps.DurationsS().size(), 4u);
    const analysis::VoidFigures want = analysis::ComputeVoid(t, steps);
    const analysis::VoidFigures& got = v.VoidOf(t);
    EXPECT_EQ(got.steps, want.steps);
    EXPECT_DOUBLE_EQ(got.VInter(), want.VInter());
    EXPECT_DOUBLE_EQ(got.VMinority(), want.VMinority());
    EXPECT_GT(got.VMinority(), i % 2 ? 0.3 : 0.05) << "rank " << i;  // the gaps are untraced work
    const auto gemms = analysis::GemmTflops(t, 0, UINT64_MAX, /*mark_concurrent=*/true);
    const auto& cached = v.GemmsOf(t);
    ASSERT_EQ(cached.size(), 1u);
    ASSERT_EQ(gemms.size(), 1u);
    EXPECT_EQ(cached.begin()->first, gemms.begin()->first);
    EXPECT_EQ(cached.begin()->second.count, 40u);
    EXPECT_EQ(cached.begin()->second.call_tflops, gemms.begin()->second.call_tflops);
    EXPECT_EQ(cached.begin()->second.call_issue_us.size(), 40u);
    // Found once: asked again, the same objects.
    EXPECT_EQ(&v.VoidOf(t), &got);
    EXPECT_EQ(&v.GemmsOf(t), &cached);
  }
  // A trace that is not one of the view's: found anew, the same figures.
  const analysis::RankTrace copy = v.ranks[1];
  EXPECT_DOUBLE_EQ(v.VoidOf(copy).VMinority(), v.VoidOf(v.ranks[1]).VMinority());
  EXPECT_NE(&v.VoidOf(copy), &v.VoidOf(v.ranks[1]));
  EXPECT_EQ(v.GemmsOf(copy).begin()->second.count, 40u);
  // The communicators, found once by FindAll, as the analysis finds them.
  const std::vector<analysis::CommBandwidth> comms = analysis::CommunicatorBandwidth(v.ranks);
  const std::vector<analysis::CommBandwidth>& cached = v.Communicators();
  ASSERT_EQ(comms.size(), 1u);
  ASSERT_EQ(cached.size(), 1u);
  EXPECT_EQ(cached[0].count, 4u);
  EXPECT_EQ(cached[0].ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_DOUBLE_EQ(cached[0].BusBw(), comms[0].BusBw());
  EXPECT_GT(cached[0].BusBw(), 0);
  EXPECT_EQ(&v.Communicators(), &cached);
}

TEST(WindowViewTest, NewDiagnosisAndFigures) {
  TestJob job;
  job.CloseWindow();
  Diagnosis d = NewDiagnosis(job, "slow_gpu", Team::kOperations);
  EXPECT_EQ(d.job, "job-1");
  EXPECT_EQ(d.kind, "slow_gpu");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_EQ(d.first_seen_ns, job.state().window_start_ns());
  EXPECT_EQ(d.last_seen_ns, job.state().window_start_ns());
  EXPECT_EQ(Fmt(1.005, 1), "1.0");
  EXPECT_EQ(Fmt(2.0 / 3), "0.67");
}

}  // namespace
}  // namespace xpu::engine
