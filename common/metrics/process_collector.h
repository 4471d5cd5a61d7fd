// process_collector — the standard Prometheus process metrics of the calling
// process, read from /proc/self at each scrape, plus xpu_build_info:
//
//   process_cpu_seconds_total          user + system CPU time
//   process_resident_memory_bytes      resident set size
//   process_virtual_memory_bytes       virtual memory size
//   process_virtual_memory_max_bytes   RLIMIT_AS (-1: unlimited)
//   process_open_fds / process_max_fds open descriptors / RLIMIT_NOFILE
//   process_start_time_seconds         start time since the Unix epoch
//   xpu_build_info{component,version}  always 1
//
// Names, types and units follow the Prometheus client libraries' process
// collector, so dashboards written for any exporter work. A figure that
// cannot be read (no /proc) is left out rather than reported as 0.
//
// Thread-safety: Collect() is const and reads only /proc; safe from any thread.
#ifndef XPU_COMMON_METRICS_PROCESS_COLLECTOR_H_
#define XPU_COMMON_METRICS_PROCESS_COLLECTOR_H_

#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace xpu::metrics {

class ProcessCollector : public prometheus::Collectable {
 public:
  // component: "engine", "daemon", ... (the xpu_build_info label).
  ProcessCollector(std::string component, std::string version);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::string component_;
  std::string version_;
};

// Parsed /proc/<pid>/stat fields the collector uses; false when malformed.
struct ProcStat {
  double utime_ticks = 0, stime_ticks = 0, starttime_ticks = 0;
  double vsize_bytes = 0, rss_pages = 0;
};
bool ParseProcStat(const std::string& text, ProcStat* out);

}  // namespace xpu::metrics

#endif  // XPU_COMMON_METRICS_PROCESS_COLLECTOR_H_
