// End to end inside one process: a fake hook hands a ring to the Daemon over
// its socket, records written afterwards reach a fake engine, the hook's exit
// is reported, and --no-engine mode keeps history without any engine.
#include "daemon/daemon.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/ring/testing/test_ring_writer.h"
#include "daemon/test_fakes.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;
using testing::FakeEngine;
using testing::FakeHook;
using testing::FakeIngest;
using testing::WaitFor;

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/xpu-daemon-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  DaemonConfig Config(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {
        "--socket", dir_ + "/d.sock",    "--flush-ms", "20", "--drain-ms",
        "2",        "--history-records", "1000"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto o = ParseDaemonOptions(args);
    EXPECT_TRUE(o.ok()) << o.status();
    auto c = MakeDaemonConfig(*o, "test");
    EXPECT_TRUE(c.ok()) << c.status();
    c->collector.liveness_interval_ns = ~0ull;  // the "hook" is this process
    c->engine.backoff_initial_ms = 20;
    c->engine.backoff_max_ms = 100;
    return *c;
  }
  std::string dir_;
};

TEST_F(DaemonTest, HookToEngineEndToEnd) {
  FakeEngine engine;
  setenv("XPU_TOKEN", "secret", 1);
  Daemon daemon(Config({"--engine", "127.0.0.1:" + std::to_string(engine.port())}));
  unsetenv("XPU_TOKEN");
  ASSERT_TRUE(daemon.Start().ok());
  TestRingConfig cfg;
  cfg.job = "e2e";
  cfg.rank = 5;
  auto ring = TestRingWriter::Create(cfg);
  const uint32_t sig = ring->AddSignature(XPU_OP_ALLREDUCE, "allreduce");
  {
    FakeHook hook(daemon.socket_path());
    ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
    ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
    for (int i = 0; i < 300; ++i)
      ring->Write(TestRingWriter::MakeRecord(sig, 1000 + i, 50, XPU_REC_TIMED));
    ASSERT_TRUE(WaitFor([&] {
      return engine.service.With([](FakeIngest& s) {
        size_t n = 0;
        for (const auto& b : s.batches_)
          for (const auto& p : b.processes()) n += p.records().size() / 32;
        return n == 300;
      });
    }));
  }  // hook exits
  ASSERT_TRUE(WaitFor([&] {
    return engine.service.With([](FakeIngest& s) {
      for (const auto& b : s.batches_)
        for (const auto& p : b.processes())
          if (p.exited()) return true;
      return false;
    });
  }));
  engine.service.With([&](FakeIngest& s) {
    ASSERT_EQ(s.hellos_.size(), 1u);
    EXPECT_EQ(s.hellos_[0].token(), "secret");
    size_t sigs = 0, records = 0;
    for (const auto& b : s.batches_) {
      for (const auto& p : b.processes()) {
        EXPECT_EQ(p.identity().job(), "e2e");
        EXPECT_EQ(p.identity().rank(), 5);
        EXPECT_EQ(p.identity().uid(), geteuid());
        sigs += p.signatures_size();
        records += p.records().size() / sizeof(xpu_record_v1);
      }
    }
    EXPECT_GE(sigs, 1u);
    EXPECT_EQ(records, 300u);  // every record is sent exactly once
  });
  daemon.Stop();
}

TEST_F(DaemonTest, NoEngineModeKeepsHistory) {
  Daemon daemon(Config({"--no-engine"}));
  ASSERT_TRUE(daemon.Start().ok());
  auto ring = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = ring->AddSignature(XPU_OP_KERNEL, "k");
  FakeHook hook(daemon.socket_path());
  ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
  ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
  // More records than the ring holds: the producer waits for the daemon.
  for (int i = 0; i < 2000; ++i) {
    while (!ring->Write(TestRingWriter::MakeRecord(sig, i, 1, 0))) usleep(1000);
  }
  ASSERT_TRUE(WaitFor([&] { return daemon.collector().stats().records_read == 2000; }));
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  xpu::v1::CommandReply reply;
  daemon.collector().HandleCommand(cmd, &reply);
  ASSERT_EQ(reply.processes_size(), 1);
  EXPECT_EQ(reply.processes(0).records().size() / 32, 1000u);  // --history-records
  // Nothing accumulates for an engine that does not exist.
  EXPECT_TRUE(daemon.collector().WithProcess(reply.processes(0).process_key(), [](ProcessState& s) {
    EXPECT_TRUE(s.pending_records.empty());
  }));
  daemon.Stop();
}

TEST_F(DaemonTest, IdleExitOnlyOnceNoProcessIsLeft) {
  Daemon never(Config({"--no-engine", "--socket", dir_ + "/never.sock"}));
  Daemon daemon(Config({"--no-engine", "--idle-exit-s", "1"}));
  ASSERT_TRUE(never.Start().ok());
  ASSERT_TRUE(daemon.Start().ok());
  auto ring = TestRingWriter::Create(TestRingConfig{});
  {
    FakeHook hook(daemon.socket_path());
    ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
    ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
    ASSERT_TRUE(WaitFor([&] { return daemon.collector().stats().processes_live == 1; }));
    // Three idle periods with a live process: still busy.
    usleep(3 * 1000 * 1000);
    EXPECT_FALSE(daemon.IdleExpired(MonotonicNs()));
  }  // the process goes
  ASSERT_TRUE(WaitFor([&] { return daemon.collector().stats().processes_live == 0; }));
  ASSERT_TRUE(WaitFor([&] { return daemon.IdleExpired(MonotonicNs()); }));
  EXPECT_FALSE(never.IdleExpired(MonotonicNs() + 1000ull * 1000 * 1000 * 1000));
  daemon.Stop();
  never.Stop();
}

TEST_F(DaemonTest, SecondDaemonOnTheSameSocketRefuses) {
  Daemon first(Config({"--no-engine"}));
  ASSERT_TRUE(first.Start().ok());
  Daemon second(Config({"--no-engine"}));
  EXPECT_EQ(second.Start().code(), absl::StatusCode::kAlreadyExists);
  first.Stop();
}

// GET of a path on 127.0.0.1:port; the body ("" on failure).
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

TEST_F(DaemonTest, MetricsEndpointPassesPromtool) {
  FakeEngine engine;
  Daemon daemon(Config({"--engine", "127.0.0.1:" + std::to_string(engine.port()),
                        "--metrics-addr", "127.0.0.1:0"}));
  ASSERT_TRUE(daemon.Start().ok());
  ASSERT_GT(daemon.metrics_port(), 0);
  auto ring = TestRingWriter::Create(TestRingConfig{});
  const uint32_t sig = ring->AddSignature(XPU_OP_KERNEL, "k");
  FakeHook hook(daemon.socket_path());
  ASSERT_TRUE(hook.SendHello(ring->fd(), ring->size()));
  ASSERT_EQ(hook.ReadAck(), XPU_HELLO_OK);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(ring->Write(TestRingWriter::MakeRecord(sig, i, 1, 0)));
  ASSERT_TRUE(WaitFor([&] { return daemon.collector().stats().records_read == 100; }));
  const std::string text = HttpGet(daemon.metrics_port(), "/metrics");
  EXPECT_NE(text.find("\nxpu_daemon_records_read_total 100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("xpu_daemon_processes{state=\"live\"} 1"), std::string::npos) << text;
  // Counters from the start: every loss reason, at 0.
  EXPECT_NE(text.find("xpu_daemon_records_lost_total{reason=\"lapped\"} 0"), std::string::npos);
  EXPECT_NE(text.find("xpu_build_info{component=\"daemon\",version=\"test\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
  EXPECT_EQ(HttpGet(daemon.metrics_port(), "/healthz"), "ok\n");
  // docs/metrics.md's daemon table and the live /metrics name the same
  // xpu_daemon_* families with the same types.
  std::map<std::string, std::string> documented, served;
  {
    std::ifstream doc(XPU_DOCS_METRICS);
    for (std::string line; std::getline(doc, line);) {
      if (line.rfind("| `xpu_daemon_", 0) != 0) continue;
      const size_t end = line.find('`', 3), bar = line.find('|', end);
      const size_t bar2 = line.find('|', bar + 1);
      std::string type = line.substr(bar + 1, bar2 - bar - 1);
      type.erase(0, type.find_first_not_of(' '));
      type.erase(type.find_last_not_of(' ') + 1);
      documented[line.substr(3, end - 3)] = type;
    }
    std::istringstream live(text);
    for (std::string line; std::getline(live, line);) {
      if (line.rfind("# TYPE xpu_daemon_", 0) != 0) continue;
      std::istringstream w(line.substr(7));
      std::string name, type;
      w >> name >> type;
      served[name] = type;
    }
  }
  EXPECT_GE(documented.size(), 5u) << "no daemon table in " << XPU_DOCS_METRICS;
  EXPECT_EQ(documented, served);
  if (access("/usr/bin/promtool", X_OK) == 0) {
    {
      std::ofstream f(dir_ + "/metrics.txt");
      f << text;
    }
    const std::string cmd = "/usr/bin/promtool check metrics < " + dir_ + "/metrics.txt > " +
                            dir_ + "/lint.txt 2>&1";
    const int rc = system(cmd.c_str());
    std::ifstream lf(dir_ + "/lint.txt");
    std::stringstream lint;
    lint << lf.rdbuf();
    EXPECT_EQ(rc, 0) << lint.str() << "\n" << text;
  } else {
    ADD_FAILURE() << "/usr/bin/promtool is required (Debian package prometheus)";
  }
  daemon.Stop();
}

TEST_F(DaemonTest, MetricsAddressInUseIsAnError) {
  Daemon first(Config({"--no-engine", "--metrics-addr", "127.0.0.1:0"}));
  ASSERT_TRUE(first.Start().ok());
  const std::string taken = "127.0.0.1:" + std::to_string(first.metrics_port());
  Daemon second(Config({"--no-engine", "--socket", dir_ + "/d2.sock", "--metrics-addr", taken}));
  EXPECT_FALSE(second.Start().ok());
  first.Stop();
}

}  // namespace
}  // namespace xpu::daemon
