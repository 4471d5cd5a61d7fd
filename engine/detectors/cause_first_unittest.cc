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

// A communicator slow with no member singled out, one of whose members is a
// slow GPU: its peers wait for that GPU inside the collective. The slow GPU
// stands, with the communicator in its evidence; a communicator without
// the slow member stays.
TEST(CauseFirstTest, SlowGpuExplainsTheCommunicatorsItIsIn) {
  std::vector<Diagnosis> v = {Make("slow_link", Team::kOperations, {0, 1}, "comm:7"),
                              Make("slow_link", Team::kOperations, {2, 3}, "comm:8"),
                              Make("slow_gpu", Team::kOperations, {1}, "rank:1")};
  FoldSymptomsIntoCauses(&v);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].subject, "comm:8");
  EXPECT_EQ(v[1].kind, "slow_gpu");
  EXPECT_THAT(v[1].evidence, HasSubstr("figures\nalso explains slow_link(comm:7) on rank(s) 0,1"));
}

// Untraced minority kernels on the rank that runs extra GPU work are that
// work: folded into extra_gpu_work; the same symptom on another rank stays.
TEST(CauseFirstTest, ExtraGpuWorkExplainsItsRanksMinorityKernels) {
  std::vector<Diagnosis> v = {Make("void_minority", Team::kInfrastructure, {1, 3}, "void_minority"),
                              Make("extra_gpu_work", Team::kAlgorithm, {1}, "extra_gpu_work")};
  FoldSymptomsIntoCauses(&v);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].kind, "void_minority");
  EXPECT_THAT(v[0].ranks, ::testing::ElementsAre(3));
  EXPECT_THAT(v[1].evidence, HasSubstr("also explains void_minority(void_minority) on rank(s) 1,3"));
  std::vector<Diagnosis> only = {Make("void_minority", Team::kInfrastructure, {1}, "void_minority"),
                                 Make("extra_gpu_work", Team::kAlgorithm, {1}, "extra_gpu_work")};
  FoldSymptomsIntoCauses(&only);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].kind, "extra_gpu_work");
}

}  // namespace
}  // namespace xpu::engine
