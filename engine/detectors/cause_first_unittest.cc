#include "engine/detectors/cause_first.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xpu::engine {
namespace {

using ::testing::HasSubstr;

Diagnosis Make(const std::string& kind, Team team, std::vector<int32_t> ranks,
               const std::string& subject = "") {
  Diagnosis d;
  d.job = "j";
  d.kind = kind;
  d.team = team;
  d.ranks = std::move(ranks);
  d.subject = subject;
  d.evidence = "figures";
  return d;
}

TEST(CauseFirstTest, UnexplainedRegressionGoesToTriage) {
  std::vector<Diagnosis> v = {Make("throughput_regression", Team::kOperations, {0, 1}, "job")};
  RouteRegressionsCauseFirst(&v);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].team, Team::kTriage);
  EXPECT_EQ(TeamName(v[0].team), "triage");
  EXPECT_THAT(v[0].evidence, HasSubstr("figures\nunexplained: no cause found"));
}

TEST(CauseFirstTest, RegressionLinksToItsCauseAndTakesItsTeam) {
  std::vector<Diagnosis> v = {
      Make("throughput_regression", Team::kOperations, {0, 1}, "job"),
      Make("unexpected_function", Team::kAlgorithm, {1}, "function:gc"),
      Make("kernel_issue_stall", Team::kAlgorithm, {1}, "gc"),
      Make("slow_gpu", Team::kOperations, {0}, "rank:0")};
  RouteRegressionsCauseFirst(&v);
  ASSERT_EQ(v.size(), 4u);
  // The most specific cause first: the stall, then the slow GPU.
  EXPECT_EQ(v[0].team, Team::kAlgorithm);
  EXPECT_THAT(v[0].evidence,
              HasSubstr("caused by: kernel_issue_stall(gc) on rank(s) 1 -> algorithm; "
                        "slow_gpu(rank:0) on rank(s) 0 -> operations; "
                        "unexpected_function(function:gc) on rank(s) 1 -> algorithm"));
  // The causes themselves are unchanged.
  EXPECT_EQ(v[3].team, Team::kOperations);
  EXPECT_EQ(v[3].evidence, "figures");
}

TEST(CauseFirstTest, HangsAndSilenceAreNotCauses) {
  std::vector<Diagnosis> v = {Make("throughput_regression", Team::kOperations, {0}, "job"),
                              Make("rank_silent", Team::kOperations, {0})};
  RouteRegressionsCauseFirst(&v);
  EXPECT_EQ(v[0].team, Team::kTriage);
}

}  // namespace
}  // namespace xpu::engine
