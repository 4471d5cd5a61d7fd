// History across runs, end to end through the engine's real ingest path:
// a healthy run's figures are recorded per (job name, GPU model) and served
// by History.Baselines; windows with a fault are not recorded; the history
// survives an engine restart and the next run of the job name is judged
// against it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "common/analysis/stats.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/synthetic_job.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/history.grpc.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::scenarios {
namespace {

constexpr int kStepsPerWindow = 5;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

SyntheticJobSpec Spec(const std::string& job) {
  SyntheticJobSpec s;
  s.job = job;
  s.job_name = "gpt-history";
  s.gpu_model = "Synthetic GPU";
  s.ranks = 8;
  return s;
}

// Median over windows of the median complete step of rank 0, from the step
// markers in the batches: the definition of a run's step baseline, computed
// here independently of the engine.
class StepWitness {
 public:
  void Observe(const xpu::v1::Batch& b) {
    for (const xpu::v1::ProcessBatch& pb : b.processes()) {
      if (pb.identity().rank() != 0) continue;
      for (const auto& s : pb.signatures()) {
        if (s.kind() == XPU_OP_STEP) step_sig_ = s.id();
      }
      std::vector<uint64_t> starts;
      for (size_t off = 0; off + sizeof(xpu_record_v1) <= pb.records().size();
           off += sizeof(xpu_record_v1)) {
        xpu_record_v1 r;
        std::memcpy(&r, pb.records().data() + off, sizeof(r));
        if (r.sig_id == step_sig_) starts.push_back(r.start_ns);
      }
      std::vector<double> d;
      for (size_t i = 1; i < starts.size(); ++i)
        d.push_back(static_cast<double>(starts[i] - starts[i - 1]) * 1e-9);
      if (!d.empty()) window_medians_.push_back(analysis::Median(d));
    }
  }
  double Median() const { return analysis::Median(window_medians_); }

 private:
  uint32_t step_sig_ = 0;
  std::vector<double> window_medians_;
};

// Runs `windows` windows of `spec`; returns the diagnoses of the job per window.
std::vector<std::vector<engine::Diagnosis>> RunJob(engine::Engine& eng,
                                                   engine::testing::FakeDaemon& daemon,
                                                   const SyntheticJobSpec& spec, int windows,
                                                   StepWitness* witness = nullptr) {
  SyntheticJob job(spec, NowNs());
  std::vector<std::vector<engine::Diagnosis>> out;
  for (int w = 0; w < windows; ++w) {
    xpu::v1::Batch b = job.NextWindow(kStepsPerWindow);
    if (witness != nullptr) witness->Observe(b);
    EXPECT_TRUE(daemon.Send(b));
    const uint64_t want = job.records_emitted();
    EXPECT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng.registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(60)));
    std::vector<engine::Diagnosis> mine;
    for (engine::Diagnosis& d : eng.TickWindow()) {
      if (d.job == spec.job) mine.push_back(std::move(d));
    }
    out.push_back(std::move(mine));
  }
  EXPECT_TRUE(eng.store().Flush().ok());
  return out;
}

xpu::v1::BaselinesReply Baselines(engine::Engine& eng, const std::string& job_name) {
  auto stub = xpu::v1::History::NewStub(xpu::engine::testing::TestChannel(eng.port()));
  grpc::ClientContext ctx;
  xpu::v1::BaselinesRequest req;
  req.set_job_name(job_name);
  xpu::v1::BaselinesReply reply;
  grpc::Status st = stub->Baselines(&ctx, req, &reply);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return reply;
}

TEST(HistoryE2eTest, HealthyRunIsRecordedWithItsFigures) {
  auto e = engine::Engine::Start(engine::testing::TestOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  engine::testing::FakeDaemon daemon((*e)->port(), "history-daemon");
  ASSERT_TRUE(daemon.Hello());
  StepWitness witness;
  auto diags = RunJob(**e, daemon, Spec("healthy-1"), 4, &witness);
  for (const auto& w : diags)
    EXPECT_TRUE(w.empty()) << w.front().kind << ": " << w.front().evidence;

  xpu::v1::BaselinesReply reply = Baselines(**e, "gpt-history");
  ASSERT_EQ(reply.runs_size(), 1);
  const xpu::v1::BaselineRun& run = reply.runs(0);
  EXPECT_EQ(run.job(), "healthy-1");
  EXPECT_EQ(run.gpu_model(), "Synthetic GPU");
  EXPECT_EQ(run.windows(), 4u) << "every window was healthy";
  EXPECT_EQ(run.steps(), 4u * (kStepsPerWindow - 1)) << "complete steps per window";
  EXPECT_NEAR(run.step_median_s(), witness.Median(), 1e-9);
  EXPECT_LE(run.step_best_s(), run.step_median_s());
  EXPECT_GE(run.void_inter(), 0);
  EXPECT_GE(run.void_minority(), 0);
  EXPECT_GT(run.gemm_signatures(), 0u);
  EXPECT_GT(run.collective_shapes(), 0u);

  // The detail behind it, from the store: every GEMM signature of the job
  // (4 distinct shapes x dtype x transposes) and issue-latency histograms of
  // both families.
  auto runs = (*e)->store().LoadRunBaselines("gpt-history", "Synthetic GPU", false, "", 0);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].gemm.size(), run.gemm_signatures());
  for (const auto& [key, g] : (*runs)[0].gemm) {
    EXPECT_EQ(key.rfind("gemm bf16 ", 0), 0u) << key;
    EXPECT_GT(g.tflops, 0) << key;
  }
  EXPECT_GT((*runs)[0].issue_latency.at("compute").total(), 0u);
  EXPECT_GT((*runs)[0].issue_latency.at("communication").total(), 0u);
  daemon.Finish();
}

TEST(HistoryE2eTest, WindowsWithAFaultAreNotRecorded) {
  auto e = engine::Engine::Start(engine::testing::TestOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  engine::testing::FakeDaemon daemon((*e)->port(), "history-daemon");
  ASSERT_TRUE(daemon.Hello());
  // Slow from the start: every window is diagnosed, nothing is recorded.
  SyntheticJobSpec always = Spec("slow-gpu-throughout");
  always.fault.slow_gpu_ranks = {3};
  auto d1 = RunJob(**e, daemon, always, 3);
  ASSERT_FALSE(d1.back().empty());
  // Healthy for two windows (10 steps), then a slow GPU: only those two count.
  SyntheticJobSpec later = Spec("slow-gpu-later");
  later.fault.slow_gpu_ranks = {3};
  later.fault.from_step = 2 * kStepsPerWindow;
  auto d2 = RunJob(**e, daemon, later, 4);
  ASSERT_TRUE(d2[0].empty() && d2[1].empty());
  ASSERT_FALSE(d2[2].empty());

  xpu::v1::BaselinesReply reply = Baselines(**e, "gpt-history");
  ASSERT_EQ(reply.runs_size(), 1);
  EXPECT_EQ(reply.runs(0).job(), "slow-gpu-later");
  EXPECT_EQ(reply.runs(0).windows(), 2u);
  daemon.Finish();
}

TEST(HistoryE2eTest, HistorySurvivesARestartAndJudgesTheNextRun) {
  engine::EngineOptions o = engine::testing::TestOptions();
  {
    auto e = engine::Engine::Start(o);
    ASSERT_TRUE(e.ok()) << e.status();
    engine::testing::FakeDaemon daemon((*e)->port(), "history-daemon");
    ASSERT_TRUE(daemon.Hello());
    for (const char* job : {"run-1", "run-2"}) RunJob(**e, daemon, Spec(job), 3);
    daemon.Finish();
  }
  auto e = engine::Engine::Start(o);  // same database
  ASSERT_TRUE(e.ok()) << e.status();
  engine::testing::FakeDaemon daemon((*e)->port(), "history-daemon");
  ASSERT_TRUE(daemon.Hello());
  // A GPU model without history: the same slowdown goes unseen.
  SyntheticJobSpec other = Spec("run-3-other-gpu");
  other.gpu_model = "Other GPU";
  other.fault.slow_gpu_ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  other.fault.slow_gpu_factor = 1.3;
  for (const auto& w : RunJob(**e, daemon, other, 4)) {
    for (const engine::Diagnosis& d : w) ADD_FAILURE() << d.kind << ": " << d.evidence;
  }
  SyntheticJobSpec slow = Spec("run-3");
  slow.fault = other.fault;
  auto diags = RunJob(**e, daemon, slow, 4);
  bool found = false;
  for (const engine::Diagnosis& d : diags.back()) {
    found |= d.kind == "throughput_regression" &&
             d.evidence.find("median of 2 previous runs of job 'gpt-history' on Synthetic GPU") !=
                 std::string::npos;
  }
  EXPECT_TRUE(found) << "no throughput_regression against the history in the last window";
  daemon.Finish();
}

}  // namespace
}  // namespace xpu::scenarios
