#include "daemon/daemon_metrics.h"

#include <string>
#include <utility>

namespace xpu::daemon {
namespace {

using prometheus::MetricType;

struct Family {
  prometheus::MetricFamily f;
  Family(const char* name, const char* help, MetricType type) {
    f.name = name;
    f.help = help;
    f.type = type;
  }
  Family& Add(double v, std::vector<std::pair<std::string, std::string>> labels = {}) {
    prometheus::ClientMetric m;
    for (auto& [k, val] : labels) m.label.push_back({k, val});
    if (f.type == MetricType::Counter) {
      m.counter.value = v;
    } else {
      m.gauge.value = v;
    }
    f.metric.push_back(std::move(m));
    return *this;
  }
};

double D(uint64_t v) { return static_cast<double>(v); }

}  // namespace

std::vector<prometheus::MetricFamily> DaemonMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  const CollectorStats c = collector_->stats();
  out.push_back(Family("xpu_daemon_processes", "Hooked processes registered, by state",
                       MetricType::Gauge)
                    .Add(D(c.processes_live), {{"state", "live"}})
                    .Add(D(c.processes - c.processes_live), {{"state", "exited"}})
                    .f);
  out.push_back(Family("xpu_daemon_records_read_total", "Records read from the hooks' rings",
                       MetricType::Counter)
                    .Add(D(c.records_read))
                    .f);
  out.push_back(
      Family("xpu_daemon_records_lost_total",
             "Records lost in the daemon, by reason (corrupt, lapped by the writer, abandoned in "
             "the ring of a dead process, pending buffer full, profile records no window claimed)",
             MetricType::Counter)
          .Add(D(c.records_corrupt), {{"reason", "corrupt"}})
          .Add(D(c.records_lapped), {{"reason", "lapped"}})
          .Add(D(c.records_abandoned), {{"reason", "abandoned"}})
          .Add(D(c.records_dropped_pending), {{"reason", "pending_full"}})
          .Add(D(c.records_profile_unclaimed), {{"reason", "profile_unclaimed"}})
          .f);
  if (hooks_ != nullptr) {
    const HookServerStats h = hooks_->stats();
    out.push_back(Family("xpu_daemon_hook_connections_total",
                         "Hook connections by outcome (registered or why refused)",
                         MetricType::Counter)
                      .Add(D(h.registered), {{"result", "registered"}})
                      .Add(D(h.denied_uid), {{"result", "denied_uid"}})
                      .Add(D(h.bad_hello), {{"result", "bad_hello"}})
                      .Add(D(h.bad_ring), {{"result", "bad_ring"}})
                      .Add(D(h.busy), {{"result", "busy"}})
                      .Add(D(h.hello_timeouts), {{"result", "hello_timeout"}})
                      .f);
  }
  if (engine_ != nullptr) {
    const EngineClientStats e = engine_->stats();
    out.push_back(Family("xpu_daemon_engine_connected", "1 while the engine stream is up",
                         MetricType::Gauge)
                      .Add(e.connected ? 1 : 0)
                      .f);
    out.push_back(Family("xpu_daemon_engine_connect_failures_total",
                         "Failed attempts to connect to the engine", MetricType::Counter)
                      .Add(D(e.connect_failures))
                      .f);
    out.push_back(Family("xpu_daemon_engine_redirects_total",
                         "Streams moved to the engine replica that serves a job",
                         MetricType::Counter)
                      .Add(D(e.redirects))
                      .f);
    out.push_back(Family("xpu_daemon_engine_batches_total", "Batches to the engine, by result",
                         MetricType::Counter)
                      .Add(D(e.batches_sent), {{"result", "sent"}})
                      .Add(D(e.batches_dropped), {{"result", "dropped"}})
                      .f);
    out.push_back(Family("xpu_daemon_engine_record_bytes_total",
                         "Record bytes written to the engine (compact or raw, --wire)",
                         MetricType::Counter)
                      .Add(D(e.record_bytes_sent))
                      .f);
    out.push_back(Family("xpu_daemon_engine_records_dropped_total",
                         "Records dropped because the engine was unreachable and the buffer full",
                         MetricType::Counter)
                      .Add(D(e.records_dropped))
                      .f);
    out.push_back(Family("xpu_daemon_engine_records_unconfirmed",
                         "Records shed from the buffer that an engine which went away may have "
                         "stored, waiting for an engine's word before they count as dropped",
                         MetricType::Gauge)
                      .Add(D(e.records_unconfirmed))
                      .f);
    out.push_back(Family("xpu_daemon_engine_records_shed_held_total",
                         "Records shed from the buffer that the engine said it already held "
                         "(not dropped)",
                         MetricType::Counter)
                      .Add(D(e.records_shed_held))
                      .f);
    out.push_back(Family("xpu_daemon_engine_buffered_bytes",
                         "Bytes buffered for the engine (--buffer-mb bounds it)",
                         MetricType::Gauge)
                      .Add(D(e.bytes_buffered))
                      .f);
  }
  return out;
}

}  // namespace xpu::daemon
