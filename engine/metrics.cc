#include "engine/metrics.h"

#include <CivetServer.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace xpu::engine {
namespace {

class TextHandler : public CivetHandler {
 public:
  TextHandler(std::function<std::string()> body, std::string content_type)
      : body_(std::move(body)), content_type_(std::move(content_type)) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    std::string body = body_();
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              content_type_.c_str(), body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  std::function<std::string()> body_;
  std::string content_type_;
};

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      records_(prometheus::BuildCounter()
                   .Name("xpu_ingest_records_total")
                   .Help("Records accepted by ingest, per job")
                   .Register(*registry_)),
      batches_(prometheus::BuildCounter()
                   .Name("xpu_ingest_batches_total")
                   .Help("Batch messages accepted by ingest")
                   .Register(*registry_)),
      rejected_(prometheus::BuildCounter()
                    .Name("xpu_ingest_rejected_total")
                    .Help("Messages or streams rejected by ingest, by reason")
                    .Register(*registry_)),
      skipped_(
          prometheus::BuildCounter()
              .Name("xpu_ingest_records_skipped_total")
              .Help(
                  "Records skipped by ingest validation (e.g. unknown sig id), per job and reason")
              .Register(*registry_)),
      dropped_(prometheus::BuildCounter()
                   .Name("xpu_records_dropped_total")
                   .Help("Records the hooks wrote that never reached analysis, per job and reason "
                         "(docs/reliability.md)")
                   .Register(*registry_)),
      daemons_(prometheus::BuildGauge()
                   .Name("xpu_daemons_connected")
                   .Help("Daemon streams currently connected")
                   .Register(*registry_)),
      job_ranks_(prometheus::BuildGauge()
                     .Name("xpu_job_ranks")
                     .Help("Processes of a job by liveness state")
                     .Register(*registry_)),
      rank_age_(prometheus::BuildGauge()
                    .Name("xpu_rank_last_record_age_seconds")
                    .Help("Seconds since the engine last received a record from the rank")
                    .Register(*registry_)),
      busbw_(prometheus::BuildGauge()
                 .Name("xpu_collective_busbw_bytes_per_second")
                 .Help("Collective bus bandwidth over the last window (last-arrival method)")
                 .Register(*registry_)),
      rejected_records_(prometheus::BuildCounter()
                            .Name("xpu_ingest_rejected_records_total")
                            .Help("Records of processes ingest refused (caps, ownership), by "
                                  "reason")
                            .Register(*registry_)),
      db_failures_(prometheus::BuildCounter()
                       .Name("xpu_db_write_failures_total")
                       .Help("History database transactions that failed (rows kept, retried)")
                       .Register(*registry_)),
      db_dropped_(prometheus::BuildCounter()
                      .Name("xpu_db_rows_dropped_total")
                      .Help("History rows given up: the retry buffer was full")
                      .Register(*registry_)),
      db_pending_(prometheus::BuildGauge()
                      .Name("xpu_db_rows_pending")
                      .Help("History rows waiting to be written")
                      .Register(*registry_)),
      db_degraded_(prometheus::BuildGauge()
                       .Name("xpu_db_degraded")
                       .Help("1 while history writes fail")
                       .Register(*registry_)) {
  db_failures_.Add({});
  db_dropped_.Add({});
  db_pending_.Add({});
  db_degraded_.Add({});
  batches_.Add({});
  daemons_.Add({});
}

Metrics::~Metrics() { StopServing(); }

absl::Status Metrics::Serve(const std::string& addr) {
  std::vector<std::string> options = {"listening_ports", addr, "num_threads", "2"};
  try {
    server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    // civetweb-cpp reports bind failures by throwing; stop it here.
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", addr, ": ", e.what()));
  }
  metrics_handler_ = std::make_unique<TextHandler>([this] { return Render(); },
                                                   "text/plain; version=0.0.4; charset=utf-8");
  health_handler_ = std::make_unique<TextHandler>(
      [this] {
        std::lock_guard<std::mutex> l(health_mu_);
        return (health_ ? health_() : std::string("ok")) + "\n";
      },
      "text/plain");
  server_->addHandler("/metrics", metrics_handler_.get());
  server_->addHandler("/healthz", health_handler_.get());
  std::vector<int> ports = server_->getListeningPorts();
  port_ = ports.empty() ? 0 : ports[0];
  return absl::OkStatus();
}

void Metrics::StopServing() {
  if (server_) server_->close();
  server_.reset();
}

std::string Metrics::Render() const {
  {
    std::lock_guard<std::mutex> l(health_mu_);
    if (refresh_) refresh_();
  }
  prometheus::TextSerializer s;
  return s.Serialize(registry_->Collect());
}

void Metrics::AddIngestedRecords(const std::string& job, uint64_t n) {
  records_.Add({{"job", job}}).Increment(static_cast<double>(n));
}
void Metrics::AddBatch() { batches_.Add({}).Increment(); }
void Metrics::AddRejected(std::string_view reason) {
  rejected_.Add({{"reason", std::string(reason)}}).Increment();
}
void Metrics::AddSkippedRecords(const std::string& job, std::string_view reason, uint64_t n) {
  skipped_.Add({{"job", job}, {"reason", std::string(reason)}}).Increment(static_cast<double>(n));
}
void Metrics::AddDropped(const std::string& job, std::string_view reason, uint64_t n) {
  dropped_.Add({{"job", job}, {"reason", std::string(reason)}}).Increment(static_cast<double>(n));
}
void Metrics::AddRejectedRecords(std::string_view reason, uint64_t n) {
  rejected_records_.Add({{"reason", std::string(reason)}}).Increment(static_cast<double>(n));
}
void Metrics::SetStore(bool degraded, uint64_t write_failures, uint64_t rows_pending,
                       uint64_t rows_dropped) {
  // Counters follow the store's own cumulative counts.
  prometheus::Counter& f = db_failures_.Add({});
  if (write_failures > f.Value()) f.Increment(static_cast<double>(write_failures) - f.Value());
  prometheus::Counter& d = db_dropped_.Add({});
  if (rows_dropped > d.Value()) d.Increment(static_cast<double>(rows_dropped) - d.Value());
  db_pending_.Add({}).Set(static_cast<double>(rows_pending));
  db_degraded_.Add({}).Set(degraded ? 1 : 0);
}
void Metrics::SetRefresh(std::function<void()> refresh) {
  std::lock_guard<std::mutex> l(health_mu_);
  refresh_ = std::move(refresh);
}
void Metrics::SetHealthCheck(std::function<std::string()> check) {
  std::lock_guard<std::mutex> l(health_mu_);
  health_ = std::move(check);
}
void Metrics::SetDaemonsConnected(size_t n) { daemons_.Add({}).Set(static_cast<double>(n)); }
void Metrics::SetJobRanks(const std::string& job, std::string_view state, size_t n) {
  job_ranks_.Add({{"job", job}, {"state", std::string(state)}}).Set(static_cast<double>(n));
}
void Metrics::SetRankLastRecordAge(const std::string& job, const std::string& rank, double s) {
  rank_age_.Add({{"job", job}, {"rank", rank}}).Set(s);
}
void Metrics::SetCollectiveBusBw(const std::string& job, const std::string& op, double v) {
  busbw_.Add({{"job", job}, {"op", op}}).Set(v);
}
void Metrics::RemoveCollectiveBusBw(const std::string& job, const std::string& op) {
  busbw_.Remove(&busbw_.Add({{"job", job}, {"op", op}}));
}
double Metrics::Rejected(std::string_view reason) {
  return rejected_.Add({{"reason", std::string(reason)}}).Value();
}
double Metrics::RejectedTotal() const {
  double total = 0;
  for (const auto& fam : registry_->Collect()) {
    if (fam.name != "xpu_ingest_rejected_total") continue;
    for (const auto& m : fam.metric) total += m.counter.value;
  }
  return total;
}

}  // namespace xpu::engine
