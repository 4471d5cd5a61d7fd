// DiagnoseProfile on findings built by hand (the findings themselves, from
// the daemons' behaviour patterns, are engine/profile/'s tests), and the
// detector adapter without a monitor.
#include "engine/profile/differential_localization.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/state/job_state.h"

namespace xpu::engine {
namespace {

using analysis::FunctionClass;
using profile::ProfileFinding;
using profile::ProfileReport;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A finding on `rank`: beta and mu against medians 0.2 and 1.0.
ProfileFinding Finding(const std::string& function, FunctionClass cls, int rank, double beta,
                       double mu = 1.0) {
  ProfileFinding f;
  f.function = function;
  f.cls = cls;
  f.rank = rank;
  f.host = rank < 4 ? "node-a" : "node-b";
  f.pattern.beta = beta;
  f.pattern.mu = mu;
  f.beta_median = 0.2;
  f.mu_median = 1.0;
  f.Delta = 0.8;
  f.M = 0.1;
  f.MAD = 0.05;
  return f;
}
// Abnormal by differential distance because it is slow in the function.
ProfileFinding Cause(const std::string& function, FunctionClass cls, int rank, double beta,
                     double mu = 1.0) {
  ProfileFinding f = Finding(function, cls, rank, beta, mu);
  f.by_difference = true;
  f.more_time = beta > f.beta_median;
  f.slower = mu < f.mu_median;
  return f;
}
// Outside its expected range on a rank, without standing out.
ProfileFinding Unexpected(const std::string& function, FunctionClass cls, int rank, double beta,
                          double D) {
  ProfileFinding f = Finding(function, cls, rank, beta);
  f.by_expectation = true;
  f.D = D;
  return f;
}

ProfileReport Report(std::vector<ProfileFinding> findings, int ranks = 8) {
  ProfileReport r;
  r.job = "job-1";
  r.trigger = "on_demand";
  r.window_ms = 4000;
  for (int i = 0; i < ranks; ++i) {
    profile::ProfileRank k;
    k.rank = i;
    k.status = "done";
    r.ranks.push_back(k);
  }
  r.findings = std::move(findings);
  return r;
}

TEST(DiagnoseProfileTest, NoFindingsNoDiagnoses) {
  EXPECT_THAT(DiagnoseProfile(Report({})), IsEmpty());
}

TEST(DiagnoseProfileTest, SlowKernelOnTwoRanksWithTheCollectiveTheyHardlyWaitIn) {
  ProfileFinding wait = Finding("ncclDevKernel_AllReduce", FunctionClass::kCollective, 5, 0.05);
  wait.by_difference = true;  // unique only by spending less time: a consequence
  std::vector<Diagnosis> out =
      DiagnoseProfile(Report({Cause("gemm", FunctionClass::kGpuCompute, 6, 0.3),
                              Cause("gemm", FunctionClass::kGpuCompute, 5, 0.3), wait}));
  ASSERT_EQ(out.size(), 1u);
  const Diagnosis& d = out[0];
  EXPECT_EQ(d.job, "job-1");
  EXPECT_EQ(d.kind, "abnormal_function");
  EXPECT_EQ(d.subject, "function:gemm");
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_EQ(d.severity, Severity::kWarning);  // 1.5 x the median: not twice
  EXPECT_THAT(d.ranks, ElementsAre(5, 6));
  EXPECT_THAT(d.hosts, ElementsAre("node-b"));
  EXPECT_EQ(d.evidence,
            "GPU kernel gemm is abnormal on 2 of 8 profiled ranks (profiling window of 4.0 s, "
            "on_demand): rank 6 (node-b): beta 0.300 vs median 0.200, pace mu 1.00 vs 1.00, "
            "differential distance 0.800 > M 0.100 + k x MAD 0.050; rank 5 (node-b): beta 0.300 "
            "vs median 0.200, pace mu 1.00 vs 1.00, differential distance 0.800 > M 0.100 + k x "
            "MAD 0.050. The same work is slower on these GPUs: check their hardware (clocks, "
            "thermals, a faulty device). Unique as a consequence (waiting less for the others): "
            "ncclDevKernel_AllReduce on rank 5 (beta 0.050 vs median 0.200).");
}

TEST(DiagnoseProfileTest, TeamAndSeverityByFunctionClass) {
  std::vector<Diagnosis> out = DiagnoseProfile(
      Report({Cause("ncclDevKernel_SendRecv", FunctionClass::kCollective, 2, 0.2, 0.5),
              Cause("DataLoader.__next__", FunctionClass::kPython, 3, 0.5)}));
  ASSERT_EQ(out.size(), 2u);
  // By function name: DataLoader first.
  EXPECT_EQ(out[0].subject, "function:DataLoader.__next__");
  EXPECT_EQ(out[0].team, Team::kAlgorithm);
  EXPECT_EQ(out[0].severity, Severity::kCritical);  // beta 0.5 >= 2 x 0.2
  EXPECT_THAT(out[0].evidence, HasSubstr("Python function DataLoader.__next__ is abnormal on 1 of "
                                         "8 profiled ranks"));
  EXPECT_THAT(out[0].evidence, HasSubstr("These ranks spend more of the step in Python"));
  EXPECT_EQ(out[1].subject, "function:ncclDevKernel_SendRecv");
  EXPECT_EQ(out[1].team, Team::kOperations);
  EXPECT_EQ(out[1].severity, Severity::kCritical);  // half the median pace
  EXPECT_THAT(out[1].evidence, HasSubstr("Communication is slower on these ranks"));
}

TEST(DiagnoseProfileTest, ManySlowRanksAreSummarized) {
  std::vector<ProfileFinding> findings;
  for (int r = 0; r < 12; ++r) findings.push_back(Cause("gemm", FunctionClass::kMemory, r, 0.3));
  std::vector<Diagnosis> out = DiagnoseProfile(Report(findings, 16));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ranks.size(), 12u);
  EXPECT_THAT(out[0].hosts, ElementsAre("node-a", "node-b"));
  EXPECT_THAT(out[0].evidence, HasSubstr("memory operation gemm is abnormal on 12 of 16"));
  EXPECT_THAT(out[0].evidence, HasSubstr("; and 4 more ranks. "));
  EXPECT_THAT(out[0].evidence, Not(HasSubstr("rank 8 (")));
}

TEST(DiagnoseProfileTest, CommonProblemsOutsideTheirExpectedRange) {
  std::vector<ProfileFinding> findings;
  for (int r = 0; r < 4; ++r) {
    findings.push_back(Unexpected("ncclDevKernel_AllReduce", FunctionClass::kCollective, r,
                                  0.35 + 0.01 * r, 0.05));
    findings.push_back(Unexpected("train_step", FunctionClass::kPython, r, 0.2, 0.19));
  }
  std::vector<Diagnosis> out = DiagnoseProfile(Report(findings, 4));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, "unexpected_function");
  EXPECT_EQ(out[0].subject, "function:ncclDevKernel_AllReduce");
  EXPECT_EQ(out[0].team, Team::kInfrastructure);
  EXPECT_EQ(out[0].severity, Severity::kWarning);
  EXPECT_THAT(out[0].ranks, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(out[0].evidence,
            "collective kernel ncclDevKernel_AllReduce is on the critical path for 35.0-38.0 % of "
            "the profiling window on 4 of 4 profiled ranks; expected at most 30.0 % (distance "
            "from expectation 0.050). The job is communication-bound: collectives are not hidden "
            "behind compute.");
  EXPECT_EQ(out[1].subject, "function:train_step");
  EXPECT_EQ(out[1].team, Team::kAlgorithm);
  EXPECT_THAT(out[1].evidence, HasSubstr("for 20.0 % of the profiling window"));
  EXPECT_THAT(out[1].evidence, HasSubstr("The training loop is bound by this Python code."));
}

TEST(DiagnoseProfileTest, WaitingInCollectivesIsExplainedByASlowRank) {
  std::vector<ProfileFinding> findings = {Cause("gemm", FunctionClass::kGpuCompute, 5, 0.4)};
  for (int r = 0; r < 4; ++r) {
    findings.push_back(
        Unexpected("ncclDevKernel_AllReduce", FunctionClass::kCollective, r, 0.35, 0.05));
  }
  findings.push_back(Unexpected("train_step", FunctionClass::kPython, 1, 0.2, 0.19));
  std::vector<Diagnosis> out = DiagnoseProfile(Report(findings));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].subject, "function:gemm");
  EXPECT_EQ(out[0].severity, Severity::kCritical);
  // The collective's excess is the others waiting for rank 5; Python is not.
  EXPECT_EQ(out[1].subject, "function:train_step");
}

TEST(DifferentialLocalizationDetectorTest, WithoutAMonitorReportsNothing) {
  profile::DifferentialLocalizationDetector d(nullptr);
  EXPECT_EQ(d.name(), "differential_localization");
  JobState job("job-1", "gpt", 16, 1);
  VectorSink sink;
  d.OnWindow(job, sink);
  EXPECT_THAT(sink.out, IsEmpty());
}

}  // namespace
}  // namespace xpu::engine
