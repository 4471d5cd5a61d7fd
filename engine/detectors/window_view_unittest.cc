// The window view every slowdown detector reads, the streaks they persist
// findings with, and the void detectors' baseline judgement.
#include "engine/detectors/window_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/detectors/detector_testing.h"
#include "engine/detectors/streaks.h"
#include "engine/detectors/void_baseline.h"

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

TEST(StreaksTest, CountsConsecutiveWindowsPerJobAndKey) {
  Streaks s;
  {
    Streaks::Window w = s.Begin("a");
    EXPECT_EQ(w.Hold("x"), 1);
    EXPECT_EQ(w.Hold("x"), 1);  // twice in one window counts once
    EXPECT_EQ(w.Hold("y"), 1);
  }
  {
    Streaks::Window w = s.Begin("a");
    EXPECT_EQ(w.Hold("x"), 2);  // y not held: its streak ends
    Streaks::Window other = s.Begin("b");
    EXPECT_EQ(other.Hold("x"), 1);  // jobs are separate
  }
  Streaks::Window w = s.Begin("a");
  EXPECT_EQ(w.Hold("x"), 3);
  EXPECT_EQ(w.Hold("y"), 1);
}

TEST(VoidBaselineTest, ThresholdBaselineAndPreviousRuns) {
  VoidBaseline b;
  // Windows under the threshold build the baseline (2 windows).
  VoidBaseline::Verdict v = b.Judge(0.04, 0.25, 0.05, 2, nullptr);
  EXPECT_FALSE(v.over);
  EXPECT_FALSE(v.have_base);
  v = b.Judge(0.30, 0.25, 0.05, 2, nullptr);  // over: not part of the baseline
  EXPECT_TRUE(v.over);
  b.Judge(0.06, 0.25, 0.05, 2, nullptr);
  v = b.Judge(0.12, 0.25, 0.05, 2, nullptr);
  EXPECT_TRUE(v.have_base);
  EXPECT_DOUBLE_EQ(v.mean_base, 0.05);
  EXPECT_TRUE(v.over);  // 0.12 > 0.05 + 0.05
  EXPECT_FALSE(b.Judge(0.09, 0.25, 0.05, 2, nullptr).over);
  // Previous runs at 2 %: 0.08 is over them by more than 0.05.
  history::HistoryFigure prev{0.02, 3};
  VoidBaseline fresh;
  v = fresh.Judge(0.08, 0.25, 0.05, 2, &prev);
  EXPECT_TRUE(v.over);
  history::HistoryBaseline hb;
  hb.job_name = "gpt";
  hb.gpu_model = "Test GPU";
  EXPECT_EQ(VoidComparisons(v, &prev, &hb), ", 2.0 % in " + hb.Describe(3));
  EXPECT_EQ(VoidComparisons(b.Judge(0.05, 0.25, 0.05, 2, nullptr), nullptr, nullptr),
            ", baseline 5.0 %");
}

}  // namespace
}  // namespace xpu::engine
