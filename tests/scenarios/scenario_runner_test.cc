// Scenario runner: every tests/scenarios/*.json is one test. The scenario's
// anomaly is injected into the SYNTHETIC record generator (synthetic_job.h),
// whose records go through the engine's real ingest path (a daemon stream
// over gRPC into Ingest.Stream); the engine runs its detectors window by
// window. Checks: every expected diagnosis (kind, exact ranks, team) appears
// within max_windows and is still reported in the last window; no other
// kind appears except those the scenario allows, and no expected kind names
// other ranks; Query.Diagnoses returns the expected ones as active.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>

#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/scenario.h"
#include "tests/scenarios/synthetic_job.h"
#include "xpu/v1/history.grpc.pb.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::scenarios {
namespace {

std::vector<std::string> ScenarioFiles() {
  std::vector<std::string> out;
  if (DIR* d = opendir(XPU_SCENARIO_DIR)) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::vector<int> Sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return std::vector<int>(v.begin(), v.end());
}

// Runs one synthetic job window by window through the engine; the
// diagnoses of that job per window go to *per_window (printed as they come).
void RunJob(engine::Engine& eng, engine::testing::FakeDaemon& daemon, const SyntheticJobSpec& spec,
            int windows, int steps_per_window,
            std::vector<std::vector<engine::Diagnosis>>* per_window) {
  SyntheticJob job(spec, NowNs());
  for (int w = 0; w < windows; ++w) {
    ASSERT_TRUE(daemon.Send(job.NextWindow(steps_per_window)));
    const uint64_t want = job.records_emitted();
    ASSERT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng.registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(60)))
        << "engine did not ingest window " << w << " of " << spec.job;
    std::vector<engine::Diagnosis> mine;
    for (engine::Diagnosis& d : eng.TickWindow()) {
      if (d.job != spec.job) continue;
      std::cout << "  " << spec.job << " window " << w + 1 << ": " << d.kind << " ["
                << engine::TeamName(d.team) << "] ranks " << absl::StrJoin(d.ranks, ",") << ": "
                << d.evidence << "\n";
      mine.push_back(std::move(d));
    }
    per_window->push_back(std::move(mine));
  }
}

class ScenarioTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScenarioTest, EngineDiagnosesTheInjectedAnomaly) {
  absl::StatusOr<Scenario> sc = LoadScenario(std::string(XPU_SCENARIO_DIR) + "/" + GetParam());
  ASSERT_TRUE(sc.ok()) << sc.status();
  if (!sc->small_job)
    ASSERT_GE(sc->job.ranks, 8) << "scenarios use at least 8 ranks (or say \"small_job\": true)";
  std::cout << "scenario " << sc->name << ": " << sc->description << "\n";

  engine::EngineOptions o = engine::testing::TestOptions();
  auto e = engine::Engine::Start(o);
  ASSERT_TRUE(e.ok()) << e.status();
  std::unique_ptr<engine::Engine> eng = std::move(*e);
  engine::testing::FakeDaemon daemon(eng->port(), "scenario-daemon");
  ASSERT_TRUE(daemon.Hello());

  // History first: previous runs of the same job name through the same
  // engine and database, then the calibration, as `xpu calibrate` uploads it.
  for (int i = 1; i <= sc->history.runs; ++i) {
    SyntheticJobSpec prev = sc->job;
    prev.job = sc->job.job + "-prev" + std::to_string(i);
    prev.fault = sc->history.fault;
    prev.seed = sc->job.seed + static_cast<uint32_t>(i);
    std::vector<std::vector<engine::Diagnosis>> diags;
    ASSERT_NO_FATAL_FAILURE(RunJob(*eng, daemon, prev,
                                   sc->history.windows > 0 ? sc->history.windows : sc->windows,
                                   sc->steps_per_window, &diags));
    if (!sc->history.faulty) {  // a healthy history run is diagnosed with nothing
      for (const auto& w : diags) {
        for (const engine::Diagnosis& d : w)
          ADD_FAILURE() << "history run " << i << ": " << d.kind << ": " << d.evidence;
      }
    }
  }
  ASSERT_TRUE(eng->store().Flush().ok());
  if (!sc->calibrated_gemm_tflops.empty() || !sc->calibrated_busbw.empty()) {
    auto history = xpu::v1::History::NewStub(xpu::engine::testing::TestChannel(eng->port()));
    xpu::v1::CalibrationReport report;
    report.set_gpu_model(sc->job.gpu_model);
    report.set_host("scenario-host");
    report.set_measured_ns(NowNs());
    for (const auto& [dtype, tflops] : sc->calibrated_gemm_tflops) {
      xpu::v1::GemmCalibration* g = report.add_gemm();
      g->set_dtype(dtype);
      g->set_tflops(tflops);
      g->set_tflops_min(tflops);
    }
    for (const Scenario::CalibratedBusBw& p : sc->calibrated_busbw) {
      xpu::v1::CollectiveCalibration* c = report.add_collectives();
      c->set_op(p.op);
      c->set_bytes(p.bytes);
      c->set_nranks(p.nranks);
      c->set_nodes(p.nodes);
      c->set_busbw_bytes_per_second(p.gbps * 1e9);
      c->set_algbw_bytes_per_second(p.gbps * 1e9);  // any positive value: only busbw is used
      c->set_time_us(1);
    }
    grpc::ClientContext ctx;
    xpu::v1::UploadCalibrationReply reply;
    grpc::Status st = history->UploadCalibration(&ctx, report, &reply);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  std::vector<std::vector<engine::Diagnosis>> per_window;
  ASSERT_NO_FATAL_FAILURE(
      RunJob(*eng, daemon, sc->job, sc->windows, sc->steps_per_window, &per_window));

  std::set<std::string> expected_kinds;
  for (const Expectation& ex : sc->expect) expected_kinds.insert(ex.kind);
  std::set<std::string> allowed(sc->allow.begin(), sc->allow.end());
  for (size_t w = 0; w < per_window.size(); ++w) {
    for (const engine::Diagnosis& d : per_window[w]) {
      if (allowed.count(d.kind)) continue;
      EXPECT_TRUE(expected_kinds.count(d.kind))
          << "window " << w + 1 << ": unexpected " << d.kind << " on ranks "
          << absl::StrJoin(d.ranks, ",") << ": " << d.evidence;
      if (!expected_kinds.count(d.kind)) continue;
      bool matches_one = false;
      for (const Expectation& ex : sc->expect) {
        matches_one |= ex.kind == d.kind && (ex.ranks.empty() || Sorted(d.ranks) == ex.ranks);
      }
      EXPECT_TRUE(matches_one) << "window " << w + 1 << ": " << d.kind << " names ranks "
                               << absl::StrJoin(d.ranks, ",") << ": " << d.evidence;
    }
  }
  for (const Expectation& ex : sc->expect) {
    auto match = [&](const engine::Diagnosis& d) {
      return d.kind == ex.kind && (ex.ranks.empty() || Sorted(d.ranks) == ex.ranks) &&
             (ex.team.empty() || engine::TeamName(d.team) == ex.team);
    };
    int first = -1;
    for (size_t w = 0; w < per_window.size() && first < 0; ++w) {
      if (std::any_of(per_window[w].begin(), per_window[w].end(), match))
        first = static_cast<int>(w);
    }
    ASSERT_GE(first, 0) << "expected " << ex.kind << " on ranks " << absl::StrJoin(ex.ranks, ",")
                        << " (" << ex.team << ") never reported";
    EXPECT_LT(first, sc->max_windows) << ex.kind << " first reported in window " << first + 1;
    EXPECT_TRUE(std::any_of(per_window.back().begin(), per_window.back().end(), match))
        << ex.kind << " no longer reported in the last window although the fault persists";
    if (!ex.evidence.empty()) {
      EXPECT_TRUE(std::any_of(per_window.back().begin(), per_window.back().end(),
                              [&](const engine::Diagnosis& d) {
                                return match(d) &&
                                       d.evidence.find(ex.evidence) != std::string::npos;
                              }))
          << ex.kind << ": no evidence in the last window mentions '" << ex.evidence << "'";
    }
  }

  // The same through the query API, from the store.
  auto stub = xpu::v1::Query::NewStub(xpu::engine::testing::TestChannel(eng->port()));
  grpc::ClientContext ctx;
  xpu::v1::DiagnosesRequest req;
  req.set_job(sc->job.job);
  xpu::v1::DiagnosesReply reply;
  ASSERT_TRUE(stub->Diagnoses(&ctx, req, &reply).ok());
  for (const Expectation& ex : sc->expect) {
    bool found = false;
    for (const auto& d : reply.diagnoses()) {
      found |= d.kind() == ex.kind && d.active() && (ex.team.empty() || d.team() == ex.team) &&
               d.first_seen_ns() <= d.last_seen_ns();
    }
    EXPECT_TRUE(found) << ex.kind << " not active in Query.Diagnoses";
  }
  if (sc->expect.empty()) {
    EXPECT_EQ(reply.diagnoses_size(), 0);
  }
  daemon.Finish();
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ScenarioTest, ::testing::ValuesIn(ScenarioFiles()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(0, i.param.size() - 5);
                           for (char& c : n) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(ScenarioFormatTest, RejectsBadFiles) {
  EXPECT_FALSE(ParseScenario("{").ok());
  EXPECT_FALSE(ParseScenario(R"({"ranks": 8})").ok());  // no name
  EXPECT_FALSE(ParseScenario(R"({"name": "x", "fault": {"warp_drive": {}}})").ok());
  absl::StatusOr<Scenario> s = ParseScenario(
      R"({"name": "x", "ranks": 8, "fault": {"from_step": 3, "slow_gpu": {"ranks": [1, 2], "factor": 3}},
          "expect": [{"kind": "slow_gpu", "ranks": [1, 2], "team": "operations"}]})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->job.fault.from_step, 3);
  EXPECT_EQ(s->job.fault.slow_gpu_ranks, (std::set<int>{1, 2}));
  EXPECT_DOUBLE_EQ(s->job.fault.slow_gpu_factor, 3);
  ASSERT_EQ(s->expect.size(), 1u);
  EXPECT_EQ(s->expect[0].ranks, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace xpu::scenarios
