#include "engine/replica/replica_metrics.h"

namespace xpu::engine::replica {
namespace {

prometheus::Counter& Counter(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
prometheus::Gauge& Gauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
void Advance(prometheus::Counter& c, uint64_t to) {
  const double now = c.Value();
  if (static_cast<double>(to) > now) c.Increment(static_cast<double>(to) - now);
}

}  // namespace

ReplicaMetrics::ReplicaMetrics(prometheus::Registry& r)
    : jobs_(Gauge(r, "xpu_replica_jobs", "Jobs this engine replica serves")),
      taken_over_(Counter(r, "xpu_replica_jobs_taken_over_total",
                          "Jobs this replica started serving (state loaded from the database)")),
      lost_(Counter(r, "xpu_replica_jobs_lost_total",
                    "Jobs claimed by another replica while this one served them")),
      redirects_(Counter(r, "xpu_ingest_redirects_total",
                         "JobRedirect messages sent to daemons (job served by another replica)")),
      write_failures_(Counter(r, "xpu_store_write_failures_total",
                              "Database transactions that failed (then retried or split)")),
      rows_dropped_(Counter(r, "xpu_store_rows_dropped_total",
                            "Rows given up: refused by the database, or beyond the retry bound")),
      rows_fenced_(Counter(r, "xpu_store_rows_fenced_total",
                           "Rows of jobs another replica owns, not written")),
      rows_pending_(Gauge(r, "xpu_store_rows_pending",
                          "Rows waiting for the database to come back")) {}

void ReplicaMetrics::SetStore(const history::WriteStats& s) {
  Advance(write_failures_, s.failures);
  Advance(rows_dropped_, s.rows_dropped);
  Advance(rows_fenced_, s.rows_fenced);
  rows_pending_.Set(static_cast<double>(s.rows_pending_retry));
}

}  // namespace xpu::engine::replica
