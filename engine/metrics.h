// metrics — the engine's Prometheus series and the HTTP endpoint serving
// them (/metrics) plus a liveness probe (/healthz).
//
// prometheus::Exposer owns its civetweb server privately and can only serve
// collectables, so /healthz could not be added to it. We run one CivetServer
// ourselves (civetweb is what prometheus-cpp-pull uses too) and serve
// /metrics with prometheus-cpp's TextSerializer over our registry: same output
// as the Exposer, plus a plain "ok" on /healthz.
//
// Naming: xpu_ prefix, base units, counters end in _total. Per-rank series are
// limited to xpu_rank_last_record_age_seconds.
//
// Thread-safety: all methods are thread-safe (prometheus-cpp metrics are).
#ifndef XPU_ENGINE_METRICS_H_
#define XPU_ENGINE_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

class CivetServer;
class CivetHandler;

namespace xpu::engine {

class Metrics {
 public:
  Metrics();
  ~Metrics();

  // Starts serving on addr ("127.0.0.1:9464"; port 0 picks a free one).
  absl::Status Serve(const std::string& addr);
  void StopServing();
  int port() const { return port_; }
  // The text exposition, as served on /metrics.
  std::string Render() const;

  void AddIngestedRecords(const std::string& job, uint64_t n);
  void AddBatch();
  void AddRejected(std::string_view reason);
  void AddSkippedRecords(const std::string& job, std::string_view reason, uint64_t n);
  // Records lost before reaching analysis, by LossReason name.
  void AddDropped(const std::string& job, std::string_view reason, uint64_t n);
  // Records of processes ingest refused (caps, ownership), by reason.
  void AddRejectedRecords(std::string_view reason, uint64_t n);
  // The history database (StoreStatus): failed writes, rows waiting, rows
  // given up, degraded or not.
  void SetStore(bool degraded, uint64_t write_failures, uint64_t rows_pending,
                uint64_t rows_dropped);
  // What /healthz answers: "ok", or "degraded: <why>" (still HTTP 200: the
  // engine serves; a probe must not restart it for a full disk).
  void SetHealthCheck(std::function<std::string()> check);
  // Runs before each rendering of /metrics (gauges read from elsewhere).
  void SetRefresh(std::function<void()> refresh);
  void SetDaemonsConnected(size_t n);
  void SetJobRanks(const std::string& job, std::string_view state, size_t n);
  void SetRankLastRecordAge(const std::string& job, const std::string& rank, double seconds);
  void SetCollectiveBusBw(const std::string& job, const std::string& op, double bytes_per_s);
  void RemoveCollectiveBusBw(const std::string& job, const std::string& op);
  // Series of the reason, for tests and the status reply.
  double Rejected(std::string_view reason);
  double RejectedTotal() const;

  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& records_;
  prometheus::Family<prometheus::Counter>& batches_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& dropped_;
  prometheus::Family<prometheus::Gauge>& daemons_;
  prometheus::Family<prometheus::Gauge>& job_ranks_;
  prometheus::Family<prometheus::Gauge>& rank_age_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Family<prometheus::Counter>& rejected_records_;
  prometheus::Family<prometheus::Counter>& db_failures_;
  prometheus::Family<prometheus::Counter>& db_dropped_;
  prometheus::Family<prometheus::Gauge>& db_pending_;
  prometheus::Family<prometheus::Gauge>& db_degraded_;
  mutable std::mutex health_mu_;
  std::function<std::string()> health_;  // guarded by health_mu_
  std::function<void()> refresh_;        // guarded by health_mu_
  std::unique_ptr<CivetServer> server_;
  std::unique_ptr<CivetHandler> metrics_handler_;
  std::unique_ptr<CivetHandler> health_handler_;
  int port_ = 0;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_METRICS_H_
