// daemon_metrics — the daemon's own Prometheus series, served on
// --metrics-addr (off by default) with /healthz, the process metrics and
// xpu_build_info{component="daemon"} (common/metrics). Read from the
// components' stats at each scrape, so every counter exists from the start.
// Names follow docs/metrics.md ("Conventions"; the daemon's table there).
//
// Thread-safety: Collect() from the HTTP threads; the stats calls lock.
#ifndef XPU_DAEMON_DAEMON_METRICS_H_
#define XPU_DAEMON_DAEMON_METRICS_H_

#include <vector>

#include "daemon/collector.h"
#include "daemon/engine_client.h"
#include "daemon/hook_server.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace xpu::daemon {

class DaemonMetrics : public prometheus::Collectable {
 public:
  // engine: nullptr with --no-engine (its series are left out). The
  // components must outlive this object.
  DaemonMetrics(Collector* collector, const HookServer* hooks, const EngineClient* engine)
      : collector_(collector), hooks_(hooks), engine_(engine) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Collector* collector_;
  const HookServer* hooks_;
  const EngineClient* engine_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_DAEMON_METRICS_H_
