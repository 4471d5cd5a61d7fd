#include "engine/metrics.h"

#include "absl/strings/str_cat.h"
#include "common/cli/flags.h"
#include "common/metrics/exposition.h"
#include "engine/state/job_state.h"

namespace xpu::engine {
namespace {

template <class T>
prometheus::Family<T>& Build(prometheus::detail::Builder<T> b, prometheus::Registry& r,
                             const char* name, const char* help) {
  return b.Name(name).Help(help).Register(r);
}

bool IsPointToPoint(const std::string& op) { return op == "send" || op == "recv"; }

// Window step durations: 1 ms .. 5 min.
const prometheus::Histogram::BucketBoundaries& StepBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return *b;
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_("engine", flags::Version()),
      records_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_records_total",
                     "Records accepted by ingest, per job")),
      batches_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_batches_total",
                     "Batch messages accepted by ingest")),
      rejected_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_rejected_total",
                      "Messages or streams rejected by ingest, by reason")),
      skipped_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_records_skipped_total",
                     "Records skipped by ingest validation (e.g. unknown sig id), per job and "
                     "reason")),
      late_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_records_late_total",
                  "Records that reached the engine after the window they belong to was analysed "
                  "(its ingest was behind); analysed in the next window, per job")),
      dropped_(Build(prometheus::BuildCounter(), *registry_, "xpu_records_dropped_total",
                     "Records the hooks wrote that never reached analysis, per job and reason "
                     "(docs/reliability.md)")),
      daemons_(Build(prometheus::BuildGauge(), *registry_, "xpu_daemons_connected",
                     "Daemon streams currently connected")),
      job_ranks_(Build(prometheus::BuildGauge(), *registry_, "xpu_job_ranks",
                       "Processes of a job by liveness state")),
      rank_age_(Build(prometheus::BuildGauge(), *registry_, "xpu_rank_last_record_age_seconds",
                      "Seconds since the engine last received a record from the rank")),
      busbw_(Build(prometheus::BuildGauge(), *registry_, "xpu_collective_busbw_bytes_per_second",
                   "Collective bus bandwidth of a job by collective, last window (last-arrival "
                   "method)")),
      p2p_bw_(Build(prometheus::BuildGauge(), *registry_, "xpu_p2p_bandwidth_bytes_per_second",
                    "Point-to-point bandwidth of a job by op (send, recv), last window")),
      window_step_(Build(prometheus::BuildHistogram(), *registry_, "xpu_window_step_seconds",
                         "Duration of one engine window step (detectors of every job)")),
      rejected_records_(Build(prometheus::BuildCounter(), *registry_,
                              "xpu_ingest_rejected_records_total",
                              "Records of processes ingest refused (caps, ownership), by reason")),
      redirects_(Build(prometheus::BuildCounter(), *registry_, "xpu_ingest_redirects_total",
                       "Daemon streams sent to the engine replica that serves their job")),
      db_failures_(Build(prometheus::BuildCounter(), *registry_, "xpu_db_write_failures_total",
                         "History database transactions that failed (rows kept, retried)")),
      db_dropped_(Build(prometheus::BuildCounter(), *registry_, "xpu_db_rows_dropped_total",
                        "History rows given up: the retry buffer was full")),
      db_pending_(Build(prometheus::BuildGauge(), *registry_, "xpu_db_rows_pending",
                        "History rows waiting to be written")),
      db_degraded_(Build(prometheus::BuildGauge(), *registry_, "xpu_db_degraded",
                         "1 while history writes fail")),
      http_([this] { return Render(); },
            [this] {
              std::lock_guard<std::mutex> l(health_mu_);
              return (health_ ? health_() : std::string("ok")) + "\n";
            }) {
  db_failures_.Add({});
  db_dropped_.Add({});
  db_pending_.Add({});
  db_degraded_.Add({});
  batches_.Add({});
  daemons_.Add({});
  for (const char* reason : kRejectReasons) rejected_.Add({{"reason", reason}});
  redirects_.Add({});
  window_step_all_ = &window_step_.Add({}, StepBuckets());
}

Metrics::~Metrics() { StopServing(); }

absl::Status Metrics::Serve(const std::string& addr) { return http_.Serve(addr); }

void Metrics::StopServing() { http_.Stop(); }

std::string Metrics::Render() const {
  {
    std::lock_guard<std::mutex> l(health_mu_);
    if (refresh_) refresh_();
  }
  return metrics::Render({registry_.get(), &process_});
}

void Metrics::EnsureJob(const std::string& job, const std::string& job_name) {
  prometheus::Labels labels;
  {
    std::lock_guard<std::mutex> l(jobs_mu_);
    auto [it, added] = jobs_.emplace(job, JobLabels(job, job_name));
    if (!added) return;
    labels = it->second;
  }
  series_.Get(job, records_, labels);
  series_.Get(job, late_, labels);
  for (int r = 0; r < kLossReasons; ++r) {
    prometheus::Labels l = labels;
    l["reason"] = std::string(LossReasonName(r));
    series_.Get(job, dropped_, l);
  }
  for (const char* reason : {"unknown_sig", "bad_signature"}) {
    prometheus::Labels l = labels;
    l["reason"] = reason;
    series_.Get(job, skipped_, l);
  }
}

prometheus::Labels Metrics::LabelsOf(const std::string& job) const {
  std::lock_guard<std::mutex> l(jobs_mu_);
  auto it = jobs_.find(job);
  return it != jobs_.end() ? it->second : prometheus::Labels{{kJobLabel, job}};
}

void Metrics::AddIngestedRecords(const std::string& job, uint64_t n) {
  if (auto* c = series_.Get(job, records_, LabelsOf(job))) c->Increment(static_cast<double>(n));
}
void Metrics::AddLateRecords(const std::string& job, uint64_t n) {
  if (auto* c = series_.Get(job, late_, LabelsOf(job))) c->Increment(static_cast<double>(n));
}
void Metrics::AddBatch() { batches_.Add({}).Increment(); }
void Metrics::AddRejected(std::string_view reason) {
  rejected_.Add({{"reason", std::string(reason)}}).Increment();
}
void Metrics::AddRedirect() { redirects_.Add({}).Increment(); }
void Metrics::AddSkippedRecords(const std::string& job, std::string_view reason, uint64_t n) {
  prometheus::Labels l = LabelsOf(job);
  l["reason"] = std::string(reason);
  if (auto* c = series_.Get(job, skipped_, l)) c->Increment(static_cast<double>(n));
}
void Metrics::AddDropped(const std::string& job, std::string_view reason, uint64_t n) {
  prometheus::Labels l = LabelsOf(job);
  l["reason"] = std::string(reason);
  if (auto* c = series_.Get(job, dropped_, l)) c->Increment(static_cast<double>(n));
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
  prometheus::Labels l = LabelsOf(job);
  l["state"] = std::string(state);
  if (auto* g = series_.Get(job, job_ranks_, l)) g->Set(static_cast<double>(n));
}
void Metrics::SetRankLastRecordAge(const std::string& job, const std::string& rank,
                                   const xpu::v1::ProcessIdentity& id, double s) {
  if (auto* g = series_.Get(job, rank_age_, rank, RankLabels(LabelsOf(job), rank, id))) g->Set(s);
}
void Metrics::RemoveRankLastRecordAge(const std::string& job, const std::string& rank) {
  series_.Remove(job, rank_age_, rank);
}
void Metrics::SetCollectiveBusBw(const std::string& job, const std::string& op, double v) {
  prometheus::Labels l = LabelsOf(job);
  l["op"] = op;
  if (auto* g = series_.Get(job, IsPointToPoint(op) ? p2p_bw_ : busbw_, op, l)) g->Set(v);
}
void Metrics::RemoveCollectiveBusBw(const std::string& job, const std::string& op) {
  series_.Remove(job, IsPointToPoint(op) ? p2p_bw_ : busbw_, op);
}
void Metrics::ObserveWindowStep(double seconds) { window_step_all_->Observe(seconds); }
double Metrics::Rejected(std::string_view reason) {
  return rejected_.Add({{"reason", std::string(reason)}}).Value();
}
double Metrics::RejectedTotal() const {
  double total = 0;
  // This family only: the registry's whole collection holds every rank's
  // gauges and takes seconds at 100k ranks.
  for (const auto& fam : rejected_.Collect()) {
    for (const auto& m : fam.metric) total += m.counter.value;
  }
  return total;
}

void Metrics::RetireJob(const std::string& job) { series_.RetireJob(job); }

void Metrics::ReviveJob(const std::string& job) {
  if (!series_.Retired(job)) return;
  series_.ReviveJob(job);
  prometheus::Labels labels = LabelsOf(job);
  series_.Get(job, records_, labels);
  for (int r = 0; r < kLossReasons; ++r) {
    prometheus::Labels l = labels;
    l["reason"] = std::string(LossReasonName(r));
    series_.Get(job, dropped_, l);
  }
}

void Metrics::ForgetJob(const std::string& job) {
  series_.ForgetJob(job);
  std::lock_guard<std::mutex> l(jobs_mu_);
  jobs_.erase(job);
}

}  // namespace xpu::engine
