// Every panel query of docker/grafana/dashboards/*.json must return data
// from a real Prometheus (Debian's binary, our own instance on a free
// loopback port with its own config and storage) scraping a real engine's
// /metrics while a synthetic job with a slow GPU runs through the engine's
// ingest path. Grafana variables are substituted: $job -> .*,
// $__rate_interval -> 1m.
#include <dirent.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "engine/alerting/http_client.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/external_process.h"
#include "tests/scenarios/synthetic_job.h"

namespace xpu::scenarios {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

struct PanelQuery {
  std::string dashboard, panel, expr;
};

std::vector<PanelQuery> DashboardQueries(std::string* uid_error) {
  std::vector<PanelQuery> out;
  const std::string dir = std::string(XPU_GRAFANA_DIR) + "/dashboards";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 6 || n.substr(n.size() - 5) != ".json") continue;
    std::ifstream f(dir + "/" + n);
    std::stringstream ss;
    ss << f.rdbuf();
    Struct dash;
    if (!google::protobuf::util::JsonStringToMessage(ss.str(), &dash).ok()) {
      out.push_back({n, "(unparseable dashboard)", ""});
      continue;
    }
    for (const Value& p : dash.fields().at("panels").list_value().values()) {
      const Struct& ps = p.struct_value();
      const std::string title = ps.fields().at("title").string_value();
      if (ps.fields().at("datasource").struct_value().fields().at("uid").string_value() !=
          "xpu-prometheus") {
        *uid_error += n + "/" + title + " ";
      }
      for (const Value& t : ps.fields().at("targets").list_value().values()) {
        out.push_back({n, title, t.struct_value().fields().at("expr").string_value()});
      }
    }
  }
  closedir(d);
  return out;
}

// Number of series the instant query returns (-1 on error).
int QuerySeries(int port, const std::string& expr, std::string* error) {
  auto r = engine::HttpRequest(
      "GET", "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=" + UrlEncode(expr),
      "", "", 5000);
  if (!r.ok() || r->status != 200) {
    *error = r.ok() ? "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 300)
                    : std::string(r.status().message());
    return -1;
  }
  Struct body;
  if (!google::protobuf::util::JsonStringToMessage(r->body, &body).ok()) {
    *error = "unparseable " + r->body.substr(0, 200);
    return -1;
  }
  return body.fields().at("data").struct_value().fields().at("result").list_value().values_size();
}

// name -> type of every row of the reference table ("| `name` | type |")
// in docs/metrics.md.
std::map<std::string, std::string> DocumentedFamilies() {
  std::map<std::string, std::string> out;
  std::ifstream f(XPU_DOCS_METRICS);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    const size_t bar = line.find('|', end);
    if (end == std::string::npos || bar == std::string::npos) continue;
    const size_t bar2 = line.find('|', bar + 1);
    std::string type = line.substr(bar + 1, bar2 - bar - 1);
    type.erase(0, type.find_first_not_of(' '));
    type.erase(type.find_last_not_of(' ') + 1);
    out[line.substr(3, end - 3)] = type;
  }
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

TEST(GrafanaQueriesE2eTest, EveryPanelQueryReturnsData) {
  std::string uid_error;
  std::vector<PanelQuery> queries = DashboardQueries(&uid_error);
  ASSERT_GE(queries.size(), 10u) << "dashboards not found under " << XPU_GRAFANA_DIR;
  EXPECT_TRUE(uid_error.empty()) << "panels not on datasource xpu-prometheus: " << uid_error;
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is required (Debian package prometheus)";

  engine::EngineOptions o = engine::testing::TestOptions();
  o.metrics_addr = "127.0.0.1:0";
  auto started = engine::Engine::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<engine::Engine> eng = std::move(*started);

  const std::string dir = MakeTempDir("xpu_prom_");
  const int port = FreeLoopbackPort();
  WriteFile(dir + "/prometheus.yml",
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: xpu-engine\n"
            "    static_configs:\n      - targets: ['127.0.0.1:" +
                std::to_string(eng->metrics_port()) + "']\n");
  ExternalProcess prom;
  ASSERT_TRUE(prom.Start({kPrometheus, "--config.file=" + dir + "/prometheus.yml",
                          "--storage.tsdb.path=" + dir + "/data",
                          "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                         dir + "/prometheus.log"));
  ASSERT_TRUE(prom.WaitReady("http://127.0.0.1:" + std::to_string(port) + "/-/ready"))
      << "prometheus did not start; see " << dir << "/prometheus.log";

  engine::testing::FakeDaemon daemon(eng->port(), "grafana-daemon");
  ASSERT_TRUE(daemon.Hello());
  SyntheticJobSpec spec;
  spec.job = "grafana-job";
  spec.ranks = 8;
  spec.fault.slow_gpu_ranks = {3};
  SyntheticJob job(spec, NowNs());
  std::string error;
  // Windows until Prometheus has scraped the per-rank figures a few times.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int windows = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(daemon.Send(job.NextWindow(3)));
    const uint64_t want = job.records_emitted();
    ASSERT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng->registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(30)));
    eng->TickWindow();
    ++windows;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    if (windows >= 4 && QuerySeries(port, "count_over_time(xpu_rank_step_seconds[1m])", &error) > 0)
      break;
  }
  for (const PanelQuery& q : queries) {
    std::string expr = absl::StrReplaceAll(q.expr, {{"$job", ".*"}, {"$__rate_interval", "1m"}});
    int n = -1;
    engine::testing::WaitFor([&] { return (n = QuerySeries(port, expr, &error)) > 0; },
                             std::chrono::seconds(30));
    EXPECT_GT(n, 0) << q.dashboard << " / " << q.panel << ": " << expr << " returned no data "
                    << error;
  }
  // The live /metrics, as Prometheus scraped it, passes `promtool check
  // metrics` (format and naming conventions: units, _total, _ratio ...).
  auto scraped = engine::HttpRequest(
      "GET", "http://127.0.0.1:" + std::to_string(eng->metrics_port()) + "/metrics", "", "", 5000);
  ASSERT_TRUE(scraped.ok() && scraped->status == 200);
  EXPECT_NE(scraped->body.find("xpu_rank_issue_latency_seconds_bucket{"), std::string::npos);
  EXPECT_NE(scraped->body.find("xpu_build_info{"), std::string::npos);
  WriteFile(dir + "/metrics.txt", scraped->body);
  const std::string lint = dir + "/promtool.txt";
  const int rc = std::system(
      ("/usr/bin/promtool check metrics < " + dir + "/metrics.txt > " + lint + " 2>&1").c_str());
  std::ifstream lf(lint);
  std::stringstream lss;
  lss << lf.rdbuf();
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << lss.str();
  // docs/metrics.md's reference table and the live /metrics name the same
  // families with the same types. Families this run cannot produce (no
  // point-to-point op, no alert receiver, no DataLoader) may be absent.
  std::map<std::string, std::string> documented = DocumentedFamilies();
  ASSERT_GE(documented.size(), 20u) << "no reference table in " << XPU_DOCS_METRICS;
  std::map<std::string, std::string> served;
  std::istringstream lines(scraped->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream f(line.substr(7));
    std::string name, type;
    f >> name >> type;
    served[name] = type;
  }
  for (const auto& [name, type] : served) {
    auto it = documented.find(name);
    EXPECT_TRUE(it != documented.end()) << name << " is served but not in docs/metrics.md";
    if (it != documented.end()) EXPECT_EQ(it->second, type) << name;
  }
  const std::set<std::string> may_be_absent = {
      "xpu_p2p_bandwidth_bytes_per_second", "xpu_alert_posts_total", "xpu_rank_dataloader_ratio",
      "xpu_ingest_rejected_records_total"};  // nothing refused in this run
  for (const auto& [name, type] : documented) {
    if (name.rfind("xpu_daemon_", 0) == 0) continue;  // the daemon's table
    EXPECT_TRUE(served.count(name) || may_be_absent.count(name))
        << name << " is in docs/metrics.md but not served";
  }
  daemon.Finish();
  prom.Stop();
}

}  // namespace
}  // namespace xpu::scenarios
