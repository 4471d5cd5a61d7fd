// The window view every slowdown detector reads.
#include "engine/window/window_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_EQ(pace.held(), 64u);
  EXPECT_EQ(pace.allocated(), 64u);
  EXPECT_EQ(other.held(), 16u);
  EXPECT_EQ(other.allocated(), 16u);
  EXPECT_EQ(other.Last(1).back().seq, 199u);  // the newest stay
  // The detectors' Get returns the view built; the tick's TrimRings after it
  // changes nothing: the next window's records grow the ring by doubling
  // toward the room this window needed (216 = 16 + 200, not a figure from
  // the already trimmed ring), the view's records meanwhile still held.
  EXPECT_EQ(&views.Get(job), &v);
  job.state().TrimRings(16, 64);
  EXPECT_EQ(other.held(), 16u);
  job.Add(1, Timed(1, 9000, 5, 200));
  EXPECT_EQ(other.allocated(), 64u);
  // Next window: only what came since, for the rank that sent it.
  job.CloseWindow();
  const WindowView& w = views.BuildAndTrim(job.state(), 16, 64);
  ASSERT_EQ(w.ranks.size(), 1u);
  EXPECT_EQ(w.ranks[0].rank, 1);
  EXPECT_THAT(Starts(w.ranks[0]), ElementsAre(9000));
  EXPECT_EQ(other.allocated(), 16u);
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
