#include "tools/xpu_cli/cli.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

#include "common/json/json.h"

namespace xpu::cli {
namespace {

struct Result {
  int code;
  std::string out, err;
};
Result RunXpu(std::vector<std::string> args, std::string env = "") {
  std::ostringstream out, err;
  int code = RunCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

// A loopback port nobody listens on (bound, then closed).
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(CliTest, HelpAndUsage) {
  Result r = RunXpu({"--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("jobs [--all]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--engine"), std::string::npos);
  r = RunXpu({"ranks", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("--job JOB"), std::string::npos);
  r = RunXpu({});
  EXPECT_EQ(r.code, kExitUsage);
  r = RunXpu({"frobnicate"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
  r = RunXpu({"ranks"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--job"), std::string::npos);
  r = RunXpu({"status", "--bogus"});
  EXPECT_EQ(r.code, kExitUsage);
}

TEST(CliTest, LaterCommandsSayNotAvailable) {
  // `timeline` exists now (timeline_cli_unittest), `hang` and `stacks` too
  // (hang_cli.cc): they need a job.
  for (const char* c : {"hang", "stacks"}) {
    Result r = RunXpu({c});
    EXPECT_EQ(r.code, kExitUsage) << c;
    EXPECT_NE(r.err.find("--job"), std::string::npos) << c;
  }
  Result r = RunXpu({"run"});
  EXPECT_EQ(r.code, kExitNotAvailable);
  EXPECT_NE(r.err.find("not available in this version"), std::string::npos);
}

TEST(CliTest, CalibrateHelpAndUsageErrors) {
  // End to end (xpu-calibrate on the GPU-less runtime, upload, detectors):
  // tests/scenarios/calibrate_e2e_test.cc.
  Result r = RunXpu({"calibrate", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("--from FILE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--lib-dir"), std::string::npos) << r.out;
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"calibrate", "--show", "--from", "r.pb"},
        {"calibrate", "--out", "x"},
        {"calibrate", "--from"},
        {"calibrate", "--show", "--lib-dir", "/x"}}) {
    Result u = RunXpu(bad);
    EXPECT_EQ(u.code, kExitUsage) << bad.back() << ": " << u.err;
  }
  Result missing = RunXpu({"calibrate", "--from", "/nonexistent/report.pb"});
  EXPECT_EQ(missing.code, kExitUsage);
  EXPECT_NE(missing.err.find("not a calibration report"), std::string::npos) << missing.err;
}

TEST(CliTest, DiagnoseAndReportNeedAJob) {
  for (const char* c : {"diagnose", "report"}) {
    Result r = RunXpu({c});
    EXPECT_EQ(r.code, kExitUsage) << c;
    EXPECT_NE(r.err.find("--job"), std::string::npos) << c;
  }
}

TEST(CliTest, DiagnosisRenderers) {
  xpu::v1::DiagnosesReply r;
  r.set_job("j1");
  xpu::v1::DiagnosisInfo* d = r.add_diagnoses();
  d->set_kind("slow_gpu");
  d->set_subject("rank:3");
  d->set_team("operations");
  d->set_severity("critical");
  d->set_active(true);
  d->add_ranks(3);
  d->add_hosts("node0");
  d->set_evidence("rank 3 at \"half\" speed");
  d->set_first_seen_ns(1);
  d->set_last_seen_ns(2);
  EXPECT_EQ(DiagnosesJson(r),
            "{\"job\":\"j1\",\"diagnoses\":[{\"kind\":\"slow_gpu\",\"subject\":\"rank:3\",\"team\":"
            "\"operations\",\"severity\":\"critical\",\"active\":true,\"ranks\":[3],\"hosts\":["
            "\"node0\"],"
            "\"evidence\":\"rank 3 at \\\"half\\\" speed\",\"first_seen_ns\":1,\"last_seen_ns\":2,"
            "\"resolved_ns\":0}]}\n");
  std::string table = DiagnosesTable(r);
  EXPECT_NE(table.find("slow_gpu"), std::string::npos);
  EXPECT_NE(table.find("active"), std::string::npos);
  xpu::v1::JobInfo job;
  job.set_job("j1");
  job.set_state("running");
  std::string report = ReportText(job, xpu::v1::RanksReply(), r);
  EXPECT_NE(report.find("For the operations team:"), std::string::npos) << report;
  EXPECT_EQ(report.find("For the algorithm team:"), std::string::npos) << report;
  EXPECT_EQ(report.find("No active diagnosis"), std::string::npos) << report;
  // A finished job keeps what was active at its end, said as such.
  job.set_state("finished");
  report = ReportText(job, xpu::v1::RanksReply(), r);
  EXPECT_NE(report.find("The job has finished; 1 diagnosis was active when it ended"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("slow_gpu [critical] ranks 3"), std::string::npos) << report;
  EXPECT_EQ(report.find("No active diagnosis"), std::string::npos) << report;
  d->set_active(false);
  EXPECT_NE(ReportText(job, xpu::v1::RanksReply(), r).find("No diagnosis was active when the job ended"),
            std::string::npos);
  job.set_state("running");
  EXPECT_NE(ReportText(job, xpu::v1::RanksReply(), r).find("No active diagnosis"),
            std::string::npos);
}

TEST(CliTest, UnreachableEngineExitsWith2) {
  const std::string addr = "127.0.0.1:" + std::to_string(DeadPort());
  Result r = RunXpu({"status", "--engine", addr});
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find("cannot reach engine at " + addr + ": "), std::string::npos) << r.err;
  // $XPU_ENGINE is used when --engine is absent.
  r = RunXpu({"jobs"}, addr);
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find(addr), std::string::npos) << r.err;
}

TEST(CliTest, StatusSumsUpAClusterOfDaemons) {
  xpu::v1::StatusReply r;
  for (int i = 0; i < 120; ++i) {
    xpu::v1::DaemonInfo* d = r.add_daemons();
    d->set_daemon_id("d" + std::to_string(i));
    d->set_host("node" + std::to_string(i));
    d->set_connected(i != 7 && i != 90);
    d->set_records(1000);
    if (i == 33) d->set_records_dropped(5);
  }
  const std::string t = StatusTable(r);
  EXPECT_NE(t.find("120 daemons: 118 connected, 2 not; the first 3 disconnected or with lost "
                   "records:"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("node7 "), std::string::npos) << t;
  EXPECT_NE(t.find("node33 "), std::string::npos) << t;
  EXPECT_NE(t.find("node90 "), std::string::npos) << t;
  EXPECT_EQ(t.find("node8 "), std::string::npos) << t;  // connected, nothing lost
  // A few daemons: every one listed, no sum.
  xpu::v1::StatusReply few;
  *few.add_daemons() = r.daemons(8);
  const std::string f = StatusTable(few);
  EXPECT_NE(f.find("node8 "), std::string::npos) << f;
  EXPECT_EQ(f.find("daemons:"), std::string::npos) << f;
}

TEST(CliTest, JsonRendering) {
  xpu::v1::RanksReply rr;
  rr.set_job("j\"1");
  auto* k = rr.add_ranks();
  k->set_rank(3);
  k->set_host("h");
  k->set_records(18446744073709551615ull);
  k->set_liveness("silent");
  EXPECT_EQ(
      RanksJson(rr),
      "{\"job\":\"j\\\"1\",\"ranks\":[{\"rank\":3,\"host\":\"h\",\"pid\":0,\"local_rank\":0,"
      "\"liveness\":\"silent\",\"records\":18446744073709551615,\"dropped\":0,\"lost\":{},"
      "\"written\":0,\"replayed\":0,\"resyncs\":0,\"signatures\":0,"
      "\"last_record_ns\":0,\"last_seen_ns\":0}]}\n");
  xpu::v1::JobsReply jr;
  EXPECT_EQ(JobsJson(jr), "{\"jobs\":[]}\n");
  jr.add_jobs()->set_job("a");
  EXPECT_NE(JobsJson(jr).find("\"state\":\"\",\"ranks\":0"), std::string::npos);
  EXPECT_NE(JobsTable(jr).find("JOB"), std::string::npos);
}

TEST(CliTest, StatusShowsEngineReplicas) {
  xpu::v1::StatusReply r;
  r.set_engine_id("e1");
  EXPECT_EQ(StatusTable(r).find("replica"), std::string::npos) << "a lone engine";
  EXPECT_EQ(StatusJson(r).find("replica"), std::string::npos);
  r.set_replica_id("b");
  auto* a = r.add_replicas();
  a->set_replica_id("a");
  a->set_address("10.0.0.1:7441");
  a->set_alive(false);
  auto* b = r.add_replicas();
  b->set_replica_id("b");
  b->set_address("10.0.0.2:7441");
  b->set_alive(true);
  b->set_jobs(1);
  const std::string table = StatusTable(r);
  EXPECT_NE(table.find("replica  b of 2:"), std::string::npos) << table;
  EXPECT_NE(table.find("a at 10.0.0.1:7441, lease expired, 0 jobs"), std::string::npos) << table;
  EXPECT_NE(table.find("b at 10.0.0.2:7441, lease valid, 1 job,"), std::string::npos) << table;
  const std::string js = StatusJson(r);
  EXPECT_NE(js.find("\"replica_id\":\"b\""), std::string::npos) << js;
  EXPECT_NE(js.find("{\"replica_id\":\"a\",\"address\":\"10.0.0.1:7441\",\"alive\":false,"
                    "\"jobs\":0"),
            std::string::npos)
      << js;
}

TEST(JsonWriterTest, EscapesControlCharacters) {
  EXPECT_EQ(json::Quote(std::string("a\x01\n\\", 4)), "\"a\\u0001\\n\\\\\"");
}

}  // namespace
}  // namespace xpu::cli
