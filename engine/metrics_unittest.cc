#include "engine/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace xpu::engine {
namespace {

// Minimal HTTP/1.1 GET over a socket; returns status line + headers + body.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  if (send(fd, req.data(), req.size(), 0) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "";
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(MetricsTest, ServesMetricsAndHealthz) {
  Metrics m;
  ASSERT_TRUE(m.Serve("127.0.0.1:0").ok());
  ASSERT_GT(m.port(), 0);
  m.EnsureJob("job-a", "llm");
  m.AddIngestedRecords("job-a", 4096);
  m.AddIngestedRecords("job-a", 4);
  m.AddBatch();
  m.AddRejected("protocol_version");
  m.AddRejected("protocol_version");
  m.AddDropped("job-a", "ring_full", 3);
  m.AddRejectedRecords("processes_per_stream", 7);
  m.SetStore(true, 2, 5, 1);
  m.SetDaemonsConnected(2);
  m.SetJobRanks("job-a", "alive", 8);
  xpu::v1::ProcessIdentity id;
  id.set_host("node0");
  id.set_device(1);
  id.set_gpu_model("NVIDIA H100 80GB HBM3");
  id.set_gpu_uuid("GPU-1");
  m.SetRankLastRecordAge("job-a", "3", id, 1.5);
  m.SetCollectiveBusBw("job-a", "allreduce", 1.25e11);
  m.SetCollectiveBusBw("job-a", "send", 2e10);
  m.ObserveWindowStep(0.02);

  std::string resp = HttpGet(m.port(), "/metrics");
  ASSERT_NE(resp.find("200 OK"), std::string::npos) << resp;
  for (const char* want : {
           "xpu_ingest_records_total{xpu_job=\"job-a\",xpu_job_name=\"llm\"} 4100",
           "xpu_ingest_batches_total 1",
           "xpu_ingest_rejected_total{reason=\"protocol_version\"} 2",
           "xpu_ingest_rejected_total{reason=\"token\"} 0",
           "xpu_records_dropped_total{reason=\"ring_full\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 3",
           "xpu_records_dropped_total{reason=\"ring_lapped\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 0",
           "xpu_ingest_records_skipped_total{reason=\"unknown_sig\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 0",
           "xpu_ingest_rejected_records_total{reason=\"processes_per_stream\"} 7",
           "xpu_db_write_failures_total 2",
           "xpu_db_rows_pending 5",
           "xpu_db_rows_dropped_total 1",
           "xpu_db_degraded 1",
           "xpu_daemons_connected 2",
           "xpu_job_ranks{state=\"alive\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 8",
           "xpu_rank_last_record_age_seconds{Hostname=\"node0\",UUID=\"GPU-1\",gpu=\"1\","
           "modelName=\"NVIDIA H100 80GB HBM3\",rank=\"3\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 1.5",
           "xpu_collective_busbw_bytes_per_second{op=\"allreduce\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} "
           "125000000000",
           "xpu_p2p_bandwidth_bytes_per_second{op=\"send\",xpu_job=\"job-a\",xpu_job_name=\"llm\"} 20000000000",
           "xpu_window_step_seconds_count 1",
           "# TYPE xpu_ingest_records_total counter",
           "# TYPE process_cpu_seconds_total counter",
           "xpu_build_info{component=\"engine\",version=\"",
       }) {
    EXPECT_NE(resp.find(want), std::string::npos) << "missing: " << want << "\n" << resp;
  }
  EXPECT_EQ(resp.find("xpu_collective_busbw_bytes_per_second{op=\"send\""), std::string::npos);
  EXPECT_EQ(resp.find("{job=\""), std::string::npos) << "a `job` label: " << resp;
  EXPECT_EQ(resp.find(",job=\""), std::string::npos) << "a `job` label: " << resp;
  EXPECT_DOUBLE_EQ(m.RejectedTotal(), 2);

  m.RemoveCollectiveBusBw("job-a", "allreduce");
  EXPECT_EQ(HttpGet(m.port(), "/metrics").find("op=\"allreduce\""), std::string::npos);

  std::string health = HttpGet(m.port(), "/healthz");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  EXPECT_NE(health.find("\r\n\r\nok\n"), std::string::npos) << health;

  m.SetHealthCheck([] { return std::string("degraded: history writes failing"); });
  health = HttpGet(m.port(), "/healthz");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  EXPECT_NE(health.find("degraded: history writes failing\n"), std::string::npos) << health;
}

TEST(MetricsTest, RetiredJobLeavesAndComesBackWithZeroedCounters) {
  Metrics m;
  m.EnsureJob("job-a", "");
  m.EnsureJob("job-b", "");
  m.AddIngestedRecords("job-a", 10);
  m.SetJobRanks("job-a", "exited", 2);
  m.RetireJob("job-a");
  std::string text = m.Render();
  EXPECT_EQ(text.find("xpu_job=\"job-a\""), std::string::npos) << text;
  EXPECT_NE(text.find("xpu_job=\"job-b\""), std::string::npos) << text;
  m.AddIngestedRecords("job-a", 5);  // ignored while retired
  EXPECT_EQ(m.Render().find("xpu_job=\"job-a\""), std::string::npos);
  m.ReviveJob("job-a");
  text = m.Render();
  EXPECT_NE(text.find("xpu_ingest_records_total{xpu_job=\"job-a\",xpu_job_name=\"\"} 0"),
            std::string::npos)
      << text;
  m.ForgetJob("job-b");
  EXPECT_EQ(m.Render().find("xpu_job=\"job-b\""), std::string::npos);
}

TEST(MetricsTest, BindFailureIsAStatus) {
  Metrics a;
  ASSERT_TRUE(a.Serve("127.0.0.1:0").ok());
  Metrics b;
  absl::Status st = b.Serve("127.0.0.1:" + std::to_string(a.port()));
  EXPECT_FALSE(st.ok());
}

}  // namespace
}  // namespace xpu::engine
