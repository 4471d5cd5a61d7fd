// End to end with a real Prometheus Alertmanager: the engine diagnoses a
// slow GPU in a synthetic job (records through the real ingest path), posts
// the diagnosis to Alertmanager's v2 API and to a JSON webhook; the alert
// must be routed to the operations receiver with the expected labels, and
// resolve (disappear from /api/v2/alerts, webhook "resolved" event) once
// the fault is gone. Alertmanager runs on a free loopback port with its own
// config and storage in a temporary directory and is stopped at the end.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <chrono>

#include "absl/strings/match.h"
#include "engine/alerting/http_client.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/external_process.h"
#include "tests/scenarios/synthetic_job.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::scenarios {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kAlertmanager[] = "/usr/bin/prometheus-alertmanager";

std::string Label(const Struct& alert, const std::string& group, const std::string& name) {
  auto g = alert.fields().find(group);
  if (g == alert.fields().end()) return "";
  auto it = g->second.struct_value().fields().find(name);
  return it == g->second.struct_value().fields().end() ? "" : it->second.string_value();
}

// The xpu_slow_gpu alerts Alertmanager currently lists.
std::vector<Struct> SlowGpuAlerts(int port, std::string* error) {
  auto r = engine::HttpRequest("GET", "http://127.0.0.1:" + std::to_string(port) + "/api/v2/alerts",
                               "", "", 5000);
  std::vector<Struct> out;
  if (!r.ok() || r->status != 200) {
    *error = r.ok() ? "HTTP " + std::to_string(r->status) : std::string(r.status().message());
    return out;
  }
  ListValue list;
  if (!google::protobuf::util::JsonStringToMessage(r->body, &list).ok()) {
    *error = "unparseable: " + r->body.substr(0, 200);
    return out;
  }
  for (const Value& v : list.values()) {
    if (Label(v.struct_value(), "labels", "alertname") == "xpu_slow_gpu")
      out.push_back(v.struct_value());
  }
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

TEST(AlertmanagerE2eTest, SlowGpuAlertIsRoutedToOperationsAndResolves) {
  ASSERT_EQ(access(kAlertmanager, X_OK), 0)
      << kAlertmanager << " is required (Debian package prometheus-alertmanager)";
  const std::string dir = MakeTempDir("xpu_am_");
  ASSERT_FALSE(dir.empty());
  const int port = FreeLoopbackPort();
  WriteFile(dir + "/alertmanager.yml", R"(route:
  receiver: default
  group_by: [alertname, job, subject]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['team="operations"']
      receiver: operations
    - matchers: ['team="infrastructure"']
      receiver: infrastructure
    - matchers: ['team="algorithm"']
      receiver: algorithm
receivers:
  - name: default
  - name: operations
  - name: infrastructure
  - name: algorithm
)");
  ExternalProcess am;
  ASSERT_TRUE(am.Start(
      {kAlertmanager, "--config.file=" + dir + "/alertmanager.yml",
       "--storage.path=" + dir + "/data", "--web.listen-address=127.0.0.1:" + std::to_string(port),
       "--cluster.listen-address="},
      dir + "/alertmanager.log"));
  ASSERT_TRUE(am.WaitReady("http://127.0.0.1:" + std::to_string(port) + "/-/ready"))
      << "alertmanager did not start; see " << dir << "/alertmanager.log";

  HttpSink webhook;
  engine::EngineOptions o = engine::testing::TestOptions();
  o.alertmanager_url = "http://127.0.0.1:" + std::to_string(port);
  o.webhook_url = "http://127.0.0.1:" + std::to_string(webhook.port()) + "/xpu";
  auto started = engine::Engine::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<engine::Engine> eng = std::move(*started);
  ASSERT_NE(eng->notifier(), nullptr);
  engine::testing::FakeDaemon daemon(eng->port(), "am-daemon");
  ASSERT_TRUE(daemon.Hello());

  SyntheticJobSpec spec;
  spec.job = "am-job";
  spec.ranks = 8;
  spec.fault.slow_gpu_ranks = {3};
  spec.fault.until_step = 10;  // windows 1-2 slow, then healthy
  SyntheticJob job(spec, NowNs());
  auto window = [&] {
    ASSERT_TRUE(daemon.Send(job.NextWindow(5)));
    const uint64_t want = job.records_emitted();
    ASSERT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng->registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(60)));
    eng->TickWindow();
    eng->notifier()->Drain();
  };
  window();
  window();

  std::string error;
  std::vector<Struct> alerts;
  ASSERT_TRUE(engine::testing::WaitFor(
      [&] {
        alerts = SlowGpuAlerts(port, &error);
        return !alerts.empty();
      },
      std::chrono::seconds(60)))
      << "no xpu_slow_gpu alert in Alertmanager: " << error
      << "; notifier ok=" << eng->notifier()->posted_ok()
      << " failed=" << eng->notifier()->posted_failed();
  ASSERT_EQ(alerts.size(), 1u);
  const Struct& a = alerts[0];
  EXPECT_EQ(Label(a, "labels", "team"), "operations");
  EXPECT_EQ(Label(a, "labels", "xpu_job"), "am-job");
  EXPECT_EQ(Label(a, "labels", "severity"), "critical");
  EXPECT_EQ(Label(a, "labels", "subject"), "rank:3");
  EXPECT_TRUE(absl::StrContains(Label(a, "annotations", "evidence"), "rank 3"))
      << Label(a, "annotations", "evidence");
  EXPECT_EQ(Label(a, "annotations", "ranks"), "3");
  // Routed by the team label to the team's receiver.
  auto receivers = a.fields().at("receivers").list_value();
  ASSERT_EQ(receivers.values_size(), 1);
  EXPECT_EQ(receivers.values(0).struct_value().fields().at("name").string_value(), "operations");

  // The fault is gone from step 10 on: the diagnosis resolves.
  window();
  ASSERT_TRUE(
      engine::testing::WaitFor([&] { return SlowGpuAlerts(port, &error).empty() && error.empty(); },
                               std::chrono::seconds(60)))
      << "xpu_slow_gpu alert still active after the fault ended " << error;

  std::vector<std::string> bodies = webhook.Bodies();
  bool firing = false, resolved = false;
  for (const std::string& b : bodies) {
    firing |= absl::StrContains(b, "\"status\":\"firing\"") &&
              absl::StrContains(b, "\"kind\":\"slow_gpu\"");
    resolved |= absl::StrContains(b, "\"status\":\"resolved\"") &&
                absl::StrContains(b, "\"kind\":\"slow_gpu\"");
  }
  EXPECT_TRUE(firing) << bodies.size() << " webhook posts";
  EXPECT_TRUE(resolved) << bodies.size() << " webhook posts";

  // Metrics and the query API agree.
  const std::string metrics = eng->metrics().Render();
  EXPECT_TRUE(
      absl::StrContains(metrics, "xpu_diagnoses_total{kind=\"slow_gpu\",team=\"operations\"} 1"))
      << metrics;
  {
    // xpu_diagnosis_active{kind,team,xpu_job,xpu_job_name} of the job: 0.
    const std::string series =
        "\nxpu_diagnosis_active{kind=\"slow_gpu\",team=\"operations\",xpu_job=\"am-job\",";
    const size_t at = metrics.find(series);
    ASSERT_NE(at, std::string::npos) << metrics;
    const std::string line = metrics.substr(at + 1, metrics.find('\n', at + 1) - at - 1);
    EXPECT_TRUE(absl::EndsWith(line, "} 0")) << line;
  }
  auto stub = xpu::v1::Query::NewStub(xpu::engine::testing::TestChannel(eng->port()));
  grpc::ClientContext ctx;
  xpu::v1::DiagnosesRequest req;
  req.set_job("am-job");
  req.set_include_resolved(true);
  xpu::v1::DiagnosesReply reply;
  ASSERT_TRUE(stub->Diagnoses(&ctx, req, &reply).ok());
  bool found = false;
  for (const auto& d : reply.diagnoses()) {
    if (d.kind() != "slow_gpu") continue;
    found = true;
    EXPECT_FALSE(d.active());
    EXPECT_GT(d.resolved_ns(), 0u);
    EXPECT_LT(d.first_seen_ns(), d.last_seen_ns());  // persisted over two windows
  }
  EXPECT_TRUE(found);
  daemon.Finish();
  am.Stop();
}

}  // namespace
}  // namespace xpu::scenarios
