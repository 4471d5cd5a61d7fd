// replica_metrics — the Prometheus series of engine replicas and of the
// store's writes (the same on both backends, history/store.h WriteStats):
//
//   xpu_replica_jobs                      jobs this replica serves
//   xpu_replica_jobs_taken_over_total     jobs it started serving (loaded from the database)
//   xpu_replica_jobs_lost_total           jobs that moved to another replica under it
//   xpu_ingest_redirects_total            JobRedirect messages sent to daemons
//   xpu_store_write_failures_total        failed database transactions (retried or split)
//   xpu_store_rows_dropped_total          rows given up (refused by the database, or over
//                                         the retry bound)
//   xpu_store_rows_fenced_total           rows of jobs another replica owns, not written
//   xpu_store_rows_pending                rows waiting for the database to come back
//
// Thread-safety: all methods are thread-safe.
#ifndef XPU_ENGINE_REPLICA_REPLICA_METRICS_H_
#define XPU_ENGINE_REPLICA_REPLICA_METRICS_H_

#include <cstdint>

#include "engine/history/store.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace xpu::engine::replica {

class ReplicaMetrics {
 public:
  explicit ReplicaMetrics(prometheus::Registry& registry);

  void SetJobs(size_t n) { jobs_.Set(static_cast<double>(n)); }
  void AddTakenOver() { taken_over_.Increment(); }
  void AddLost(size_t n) { lost_.Increment(static_cast<double>(n)); }
  void AddRedirect() { redirects_.Increment(); }
  // Brings the store series up to `s` (counters only move forward).
  void SetStore(const history::WriteStats& s);

 private:
  prometheus::Gauge& jobs_;
  prometheus::Counter& taken_over_;
  prometheus::Counter& lost_;
  prometheus::Counter& redirects_;
  prometheus::Counter& write_failures_;
  prometheus::Counter& rows_dropped_;
  prometheus::Counter& rows_fenced_;
  prometheus::Gauge& rows_pending_;
};

}  // namespace xpu::engine::replica

#endif  // XPU_ENGINE_REPLICA_REPLICA_METRICS_H_
