// engine/profile/profile_monitor_unittest.cc — from the daemons' behaviour
// patterns to findings and diagnoses (BuildReport, DiagnoseProfile), the
// rate limit of automatic windows, on-demand windows and the detector
// adapter, with an injected clock and a fake daemon.
#include "engine/profile/profile_monitor.h"

#include <gtest/gtest.h>

#include <future>

#include "engine/profile/differential_localization.h"

namespace xpu::engine::profile {
namespace {

constexpr uint64_t kS = 1000000000ull;

void AddFunction(xpu::v1::ProcessProfile* p, const std::string& name, uint32_t cls, double beta,
                 uint64_t n, uint64_t d) {
  xpu::v1::FunctionPattern* f = p->add_functions();
  f->set_name(name);
  f->set_cls(cls);
  f->set_beta(beta);
  f->set_executions(n);
  f->set_exec_ns(n * d);
  f->set_inv_exec_per_s(static_cast<double>(n) * 1e9 / static_cast<double>(d));
  f->set_min_exec_ns(d);
}

// Ranks 0-7 on two hosts. Rank 5 runs `gemm` twice as slowly (2 x 200 us,
// beta 0.4, against 2 x 100 us, beta 0.2) and hardly waits in the allreduce
// (beta 0.05 against 0.35); rank 3 spends 20 % of the window in the
// DataLoader (the others 0.5 %); rank 7 did not run a window (another CUPTI
// client).
xpu::v1::ProcessProfile Rank(int r) {
  xpu::v1::ProcessProfile p;
  p.mutable_identity()->set_job("j");
  p.mutable_identity()->set_rank(r);
  p.mutable_identity()->set_host(r < 4 ? "node-a" : "node-b");
  p.mutable_identity()->set_pid(100 + r);
  if (r == 7) {
    p.set_status("skipped_other_client");
    p.set_reason(
        "skipped: another CUPTI client is active (torch.profiler / Kineto, Nsight, a debugger)");
    return p;
  }
  p.set_status("done");
  p.set_window_start_ns(10 * kS);
  p.set_window_end_ns(25 * kS);
  p.set_t0_ns(10 * kS);
  p.set_t1_ns(24 * kS);
  p.set_iterations(14);
  p.set_step_source("step markers");
  p.set_kernel_records(1000);
  p.set_hook_flags(XPU_PROFILE_FINALIZED);
  AddFunction(&p, "gemm", 1, r == 5 ? 0.4 : 0.2, 2, r == 5 ? 200000 : 100000);
  AddFunction(&p, "ncclDevKernel_AllReduce", 3, r == 5 ? 0.05 : 0.35, 1, 100000);
  AddFunction(&p, "DataLoader.__next__", 4, r == 3 ? 0.2 : 0.005, 1, 100000);
  return p;
}

std::vector<xpu::v1::ProfileReply> Replies() {
  std::vector<xpu::v1::ProfileReply> out(2);
  out[0].set_host("node-a");
  out[1].set_host("node-b");
  for (int r = 0; r < 8; ++r) *out[r < 4 ? 0 : 1].add_processes() = Rank(r);
  return out;
}

std::vector<ProfileMonitor::KnownRank> Known(int n) {
  std::vector<ProfileMonitor::KnownRank> k;
  for (int r = 0; r < n; ++r) k.push_back({r, r < 4 ? "node-a" : "node-b", 100 + r});
  return k;
}

const Diagnosis* Find(const std::vector<Diagnosis>& ds, const std::string& kind,
                      const std::string& subject) {
  for (const Diagnosis& d : ds) {
    if (d.kind == kind && d.subject == subject) return &d;
  }
  return nullptr;
}

TEST(ProfileReportTest, NamesTheSlowKernelOnTheSlowRank) {
  ProfileReport r = ProfileMonitor::BuildReport("j", "on_demand", 4000, Known(8), Replies(), {});
  ASSERT_EQ(r.ranks.size(), 8u);
  EXPECT_EQ(r.ranks_profiled(), 7u);
  EXPECT_EQ(r.ranks[7].status, "skipped_other_client");
  EXPECT_EQ(r.SkippedReason(), "skipped: another CUPTI client is active");

  // gemm, 7 ranks compared: rank 5 normalized (1, 0.5, 0), the others
  // (0.5, 1, 0); Delta_5 = 6/7, the others 1/7 = M, MAD 0.
  const ProfileFinding* gemm = nullptr;
  const ProfileFinding* wait = nullptr;
  for (const ProfileFinding& f : r.findings) {
    if (f.function == "gemm") gemm = &f;
    if (f.function == "ncclDevKernel_AllReduce" && f.rank == 5) wait = &f;
  }
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->rank, 5);
  EXPECT_EQ(gemm->host, "node-b");
  EXPECT_NEAR(gemm->Delta, 6.0 / 7.0, 1e-12);
  EXPECT_NEAR(gemm->M, 1.0 / 7.0, 1e-12);
  EXPECT_DOUBLE_EQ(gemm->MAD, 0);
  EXPECT_DOUBLE_EQ(gemm->pattern.mu, 0.5);
  EXPECT_TRUE(gemm->cause());
  ASSERT_NE(wait, nullptr);
  EXPECT_TRUE(wait->by_difference);
  EXPECT_FALSE(wait->cause()) << "rank 5 waits less in the allreduce: a consequence";

  const Diagnosis* slow = Find(r.diagnoses, "abnormal_function", "function:gemm");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(slow->ranks, std::vector<int32_t>{5});
  EXPECT_EQ(slow->hosts, std::vector<std::string>{"node-b"});
  EXPECT_EQ(slow->team, Team::kOperations);
  EXPECT_EQ(slow->severity, Severity::kCritical);  // beta 0.4 = 2 x median 0.2
  EXPECT_NE(slow->evidence.find("GPU kernel gemm is abnormal on 1 of 7 profiled ranks"),
            std::string::npos)
      << slow->evidence;
  EXPECT_NE(slow->evidence.find("ncclDevKernel_AllReduce on rank 5"), std::string::npos)
      << slow->evidence;
  EXPECT_EQ(Find(r.diagnoses, "abnormal_function", "function:ncclDevKernel_AllReduce"), nullptr);

  // The DataLoader on rank 3: unique and above its 1 % expectation.
  const Diagnosis* py = Find(r.diagnoses, "abnormal_function", "function:DataLoader.__next__");
  ASSERT_NE(py, nullptr);
  EXPECT_EQ(py->ranks, std::vector<int32_t>{3});
  EXPECT_EQ(py->team, Team::kAlgorithm);

  // The allreduce at 35 % on the six waiting ranks is outside [0, 0.3]
  // (a finding by expectation), but explained by the slow rank: no
  // communication-bound diagnosis.
  size_t by_expectation = 0;
  for (const ProfileFinding& f : r.findings) {
    by_expectation +=
        f.function == "ncclDevKernel_AllReduce" && f.by_expectation && !f.by_difference;
  }
  EXPECT_EQ(by_expectation, 6u);
  EXPECT_EQ(Find(r.diagnoses, "unexpected_function", "function:ncclDevKernel_AllReduce"), nullptr);

  const std::string json = r.Json();
  EXPECT_NE(json.find("\"ranks_profiled\":7"), std::string::npos);
  EXPECT_NE(json.find("\"skipped_reason\":\"skipped: another CUPTI client is active\""),
            std::string::npos);
  EXPECT_NE(json.find("\"kind\":\"abnormal_function\""), std::string::npos);
  const std::string text = r.Text();
  EXPECT_NE(text.find("7/8 ranks profiled"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 5: gemm (gpu_compute)"), std::string::npos) << text;
}

// Every rank spends 35 % of the window in the allreduce and nobody is slow:
// a common problem (distance from expectation), communication-bound ->
// infrastructure.
TEST(ProfileReportTest, CommunicationBoundJob) {
  std::vector<xpu::v1::ProfileReply> replies(1);
  for (int r = 0; r < 4; ++r) {
    xpu::v1::ProcessProfile p = Rank(r == 3 ? 0 : r);  // no DataLoader outlier either
    p.mutable_identity()->set_rank(r);
    p.mutable_identity()->set_pid(100 + r);
    *replies[0].add_processes() = p;
  }
  ProfileReport r = ProfileMonitor::BuildReport("j", "on_demand", 4000, Known(4), replies, {});
  EXPECT_EQ(r.ranks_profiled(), 4u);
  const Diagnosis* comm =
      Find(r.diagnoses, "unexpected_function", "function:ncclDevKernel_AllReduce");
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->ranks, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(comm->team, Team::kInfrastructure);
  EXPECT_NE(comm->evidence.find(
                "35.0 % of the profiling window on 4 of 4 profiled ranks; expected at most 30.0 %"),
            std::string::npos)
      << comm->evidence;
  for (const Diagnosis& d : r.diagnoses) EXPECT_NE(d.kind, "abnormal_function") << d.subject;
}

TEST(ProfileReportTest, EveryRankSkippedSaysWhy) {
  std::vector<xpu::v1::ProfileReply> replies(1);
  for (int r = 0; r < 4; ++r) {
    xpu::v1::ProcessProfile* p = replies[0].add_processes();
    p->mutable_identity()->set_rank(r);
    p->mutable_identity()->set_pid(100 + r);
    p->set_status("skipped_other_client");
  }
  ProfileReport r = ProfileMonitor::BuildReport("j", "on_demand", 4000, {}, replies, {});
  EXPECT_EQ(r.ranks_profiled(), 0u);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(r.diagnoses.empty());
  EXPECT_EQ(r.SkippedReason(), "skipped: another CUPTI client is active");
  EXPECT_NE(r.Text().find("not profiled: 4 ranks: skipped: another CUPTI client is active"),
            std::string::npos)
      << r.Text();
}

TEST(ProfileReportTest, RanksWithoutReplyAreListed) {
  ProfileReport r = ProfileMonitor::BuildReport("j", "on_demand", 4000, Known(3), {}, {});
  ASSERT_EQ(r.ranks.size(), 3u);
  for (const ProfileRank& k : r.ranks) EXPECT_EQ(k.status, "no_reply");
}

TEST(ProfileReportTest, DemangledDisplayNames) {
  EXPECT_EQ(DisplayName("_Z3fooi"), "foo(int)");
  EXPECT_EQ(DisplayName("plain_kernel"), "plain_kernel");
  EXPECT_EQ(DisplayName(std::string(300, 'x'), 10), "xxxxxxx...");
}

class ProfileMonitorTest : public ::testing::Test {
 protected:
  ProfileMonitorTest() : registry_([this] { return now_.load(); }, 30 * kS, 1024) {}

  void Populate() {
    auto job = registry_.GetOrCreateJob("j", "");
    std::lock_guard<std::mutex> l(job->mu());
    for (int r = 0; r < 8; ++r) {
      xpu::v1::ProcessIdentity id;
      id.set_job("j");
      id.set_rank(r);
      id.set_host(r < 4 ? "node-a" : "node-b");
      id.set_pid(100 + r);
      job->GetOrCreateProcess(id, r < 4 ? "d-a" : "d-b", now_);
    }
  }

  CommandFuture Answer(const std::string& daemon, const xpu::v1::Command& c) {
    ++commands_;
    EXPECT_EQ(c.kind(), "profile");
    EXPECT_EQ(c.job(), "j");
    last_profile_ms_ = c.profile_ms();
    xpu::v1::ProfileReply reply;
    for (int r = daemon == "d-a" ? 0 : 4; r < (daemon == "d-a" ? 4 : 8); ++r)
      *reply.add_processes() = Rank(r);
    xpu::v1::CommandReply cr;
    cr.set_ok(true);
    cr.set_payload(reply.SerializeAsString());
    std::promise<absl::StatusOr<xpu::v1::CommandReply>> p;
    CommandFuture f = p.get_future();
    std::lock_guard<std::mutex> l(mu_);
    if (hold_) {
      held_.emplace_back(std::move(p), cr);  // answered when the test releases it
    } else {
      p.set_value(cr);
    }
    return f;
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [p, cr] : held_) p.set_value(cr);
    held_.clear();
  }
  size_t Held() {
    std::lock_guard<std::mutex> l(mu_);
    return held_.size();
  }

  ProfileMonitorOptions Options() {
    ProfileMonitorOptions o;
    o.window_ms = 1000;
    o.min_interval_ns = 600 * kS;
    o.report_ttl_ns = 300 * kS;
    o.grace_ms = 1000;
    return o;
  }

  std::atomic<uint64_t> now_{1000 * kS};
  Registry registry_;
  std::atomic<int> commands_{0};
  std::atomic<uint32_t> last_profile_ms_{0};
  std::mutex mu_;
  bool hold_ = false;  // guarded by mu_
  std::vector<std::pair<std::promise<absl::StatusOr<xpu::v1::CommandReply>>, xpu::v1::CommandReply>>
      held_;
};

TEST_F(ProfileMonitorTest, AutomaticWindowsAreRateLimitedPerJob) {
  Populate();
  ProfileMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  EXPECT_TRUE(m.OnThroughputRegression("j", now_));
  // Wait for the background window.
  for (int i = 0; i < 500 && !m.Latest("j"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(m.Latest("j").has_value());
  EXPECT_EQ(commands_.load(), 2) << "one command per daemon";
  EXPECT_EQ(last_profile_ms_.load(), 1000u);
  EXPECT_EQ(m.Latest("j")->trigger, "throughput_regression");
  // Within the interval: no second window, however often the regression is reported.
  now_ += 599 * kS;
  EXPECT_FALSE(m.OnThroughputRegression("j", now_));
  now_ += 2 * kS;
  EXPECT_TRUE(m.OnThroughputRegression("j", now_));
  m.Stop();
  EXPECT_EQ(commands_.load(), 4);
  // Disabled: never.
  ProfileMonitorOptions off = Options();
  off.auto_trigger = false;
  ProfileMonitor quiet(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); }, off);
  EXPECT_FALSE(quiet.OnThroughputRegression("j", now_));
}

TEST_F(ProfileMonitorTest, OnDemandWindowAndDetectorAdapter) {
  ProfileMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  EXPECT_EQ(m.RunNow("j", 2, 0).status().code(), absl::StatusCode::kNotFound);
  Populate();
  absl::StatusOr<ProfileReport> r = m.RunNow("j", 2, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->trigger, "on_demand");
  EXPECT_EQ(r->window_ms, 2000u);
  EXPECT_EQ(last_profile_ms_.load(), 2000u);
  EXPECT_EQ(r->daemons_asked, 2u);
  EXPECT_EQ(r->daemons_answered, 2u);
  EXPECT_EQ(r->finished_ns, now_.load());
  ASSERT_NE(Find(r->diagnoses, "abnormal_function", "function:gemm"), nullptr);

  // The adapter reports the latest report's diagnoses while it is fresh.
  DifferentialLocalizationDetector det(&m);
  std::shared_ptr<JobState> job = registry_.FindJob("j");
  VectorSink sink;
  {
    std::lock_guard<std::mutex> l(job->mu());
    job->CloseWindow(now_ + 10 * kS);
    det.OnWindow(*job, sink);
  }
  EXPECT_EQ(sink.out.size(), r->diagnoses.size());
  ASSERT_NE(Find(sink.out, "abnormal_function", "function:gemm"), nullptr);
  EXPECT_EQ(Find(sink.out, "abnormal_function", "function:gemm")->ranks, std::vector<int32_t>{5});
  EXPECT_TRUE(m.ActiveDiagnoses("j", now_ + 301 * kS).empty()) << "stale after the TTL";
  EXPECT_TRUE(m.ActiveDiagnoses("other", now_).empty());
}

// One window per job at a time: on demand while an automatic one runs.
TEST_F(ProfileMonitorTest, OneWindowPerJobAtATime) {
  Populate();
  ProfileMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = true;
  }
  ASSERT_TRUE(m.OnThroughputRegression("j", now_));
  for (int i = 0; i < 500 && Held() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(Held(), 2u);
  EXPECT_EQ(m.RunNow("j", 1, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  Release();
  m.Stop();
  ASSERT_TRUE(m.Latest("j").has_value());
  {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = false;
  }
  EXPECT_EQ(m.RunNow("j", 1, 0).status().code(), absl::StatusCode::kUnavailable)
      << "stopped: refuses";
}

}  // namespace
}  // namespace xpu::engine::profile
