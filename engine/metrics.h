// metrics — the engine's own Prometheus series (ingest, liveness, bandwidth,
// window step) and the /metrics + /healthz endpoint that serves them with
// every other family registered on registry() (per-rank figures, diagnoses,
// alert posts), the process metrics and xpu_build_info.
//
// Conventions (docs/metrics.md, "Conventions"): xpu_ prefix, base units,
// counters end in _total, shares end in _ratio. A job's series carry
// xpu_job (the job id; never `job`, which is Prometheus's scrape job) and
// xpu_job_name (XPU_JOB_NAME, the history key); a rank's series add `rank`
// and the label names dcgm-exporter gives a GPU (Hostname, gpu, UUID,
// modelName), so that they join DCGM's per-GPU series on UUID. Counters
// exist from the start: label-less and reason counters at start, a job's
// counters when the job appears (EnsureJob). A job's series are tracked
// (series()) and removed when it has been finished longer than the
// retention (Engine::TickWindow).
//
// Thread-safety: all methods are thread-safe (prometheus-cpp metrics are;
// the job table has its own mutex).
#ifndef XPU_ENGINE_METRICS_H_
#define XPU_ENGINE_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/metrics/http_endpoint.h"
#include "common/metrics/process_collector.h"
#include "engine/state/job_series.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "xpu/v1/common.pb.h"

namespace xpu::engine {

// Ingest rejection reasons (xpu_ingest_rejected_total{reason}); each series
// exists from the start at 0.
inline constexpr const char* kRejectReasons[] = {
    "stream_aborted", "no_hello",           "protocol_version", "token",
    "hello_invalid",  "duplicate_hello",    "empty_message",    "record_blob_size",
    "no_identity",    "record_undecodable", "write_backlog"};

class Metrics {
 public:
  Metrics();
  ~Metrics();

  // Starts serving on addr ("127.0.0.1:9464"; port 0 picks a free one).
  absl::Status Serve(const std::string& addr);
  void StopServing();
  int port() const { return http_.port(); }
  // The text exposition, as served on /metrics.
  std::string Render() const;

  // Creates the job's counters at 0 (once; a job's name is fixed by its
  // first call). Every per-job call below needs it first.
  void EnsureJob(const std::string& job, const std::string& job_name);
  // The job's labels (xpu_job only when EnsureJob was not called).
  prometheus::Labels LabelsOf(const std::string& job) const;

  void AddIngestedRecords(const std::string& job, uint64_t n);
  // Records that arrived after their window was analysed
  // (WindowSummaryRow::late_records).
  void AddLateRecords(const std::string& job, uint64_t n);
  void AddBatch();
  void AddRejected(std::string_view reason);
  // A daemon stream sent to the engine replica that serves its job.
  void AddRedirect();
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
  // `rank`: the rank, or the process key of a rank-less process.
  void SetRankLastRecordAge(const std::string& job, const std::string& rank,
                            const xpu::v1::ProcessIdentity& id, double seconds);
  // Collectives go to xpu_collective_busbw_bytes_per_second, point-to-point
  // ops (send, recv) to xpu_p2p_bandwidth_bytes_per_second.
  void SetCollectiveBusBw(const std::string& job, const std::string& op, double bytes_per_s);
  void RemoveCollectiveBusBw(const std::string& job, const std::string& op);
  void RemoveRankLastRecordAge(const std::string& job, const std::string& rank);
  // Duration of one window step of the engine (all jobs).
  void ObserveWindowStep(double seconds);
  // Series of the reason, for tests and the status reply.
  double Rejected(std::string_view reason);
  double RejectedTotal() const;

  // Removes every series of the job and ignores its updates until
  // ReviveJob; ForgetJob when the job leaves the engine.
  void RetireJob(const std::string& job);
  void ReviveJob(const std::string& job);
  void ForgetJob(const std::string& job);

  prometheus::Registry& registry() { return *registry_; }
  JobSeries& series() { return series_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  metrics::ProcessCollector process_;
  prometheus::Family<prometheus::Counter>& records_;
  prometheus::Family<prometheus::Counter>& batches_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Counter>& late_;
  prometheus::Family<prometheus::Counter>& dropped_;
  prometheus::Family<prometheus::Gauge>& daemons_;
  prometheus::Family<prometheus::Gauge>& job_ranks_;
  prometheus::Family<prometheus::Gauge>& rank_age_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Family<prometheus::Gauge>& p2p_bw_;
  prometheus::Family<prometheus::Histogram>& window_step_;
  prometheus::Histogram* window_step_all_ = nullptr;
  prometheus::Family<prometheus::Counter>& rejected_records_;
  prometheus::Family<prometheus::Counter>& redirects_;
  prometheus::Family<prometheus::Counter>& db_failures_;
  prometheus::Family<prometheus::Counter>& db_dropped_;
  prometheus::Family<prometheus::Gauge>& db_pending_;
  prometheus::Family<prometheus::Gauge>& db_degraded_;
  mutable std::mutex health_mu_;
  std::function<std::string()> health_;  // guarded by health_mu_
  std::function<void()> refresh_;        // guarded by health_mu_
  JobSeries series_;
  mutable std::mutex jobs_mu_;
  std::map<std::string, prometheus::Labels> jobs_;
  metrics::HttpEndpoint http_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_METRICS_H_
