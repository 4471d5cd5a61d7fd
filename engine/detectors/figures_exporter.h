// figures_exporter — publishes the per-rank analysis figures of each window
// as Prometheus gauges (for the Grafana dashboards in docker/grafana/); it
// runs in the detector loop but reports no diagnosis.
//
//   xpu_rank_step_seconds{job,rank}                 mean step time
//   xpu_rank_gemm_tflops{job,rank}                  GEMM TFLOPS (timed, no overlap)
//   xpu_rank_busbw_bytes_per_second{job,rank}       last-arrival busbw of the
//                                                   collectives the rank took part in
//   xpu_rank_issue_latency_seconds{job,rank,family,quantile}  p10/p50/p90
//   xpu_rank_void_ratio{job,rank,kind="inter"|"minority"}
//   xpu_rank_dataloader_share{job,rank}
// A series keeps its last value while a window has no data for it and is
// removed when the job is retired (Retain).
#ifndef XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
#define XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/window/window_view.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace xpu::engine {

class FiguresExporter : public ViewDetector {
 public:
  FiguresExporter(std::shared_ptr<WindowViews> views, std::shared_ptr<const DetectorConfig> config,
                  prometheus::Registry& registry);
  std::string_view name() const override { return "figures"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;
  void Retain(const std::vector<std::string>& jobs);

 private:
  using Labels = std::map<std::string, std::string>;
  void Set(prometheus::Family<prometheus::Gauge>& f, const Labels& labels, double v);

  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& tflops_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Family<prometheus::Gauge>& issue_;
  prometheus::Family<prometheus::Gauge>& void_;
  prometheus::Family<prometheus::Gauge>& dataloader_;
  // job -> (family, labels) set, to remove a retired job's series.
  std::map<std::string, std::set<std::pair<prometheus::Family<prometheus::Gauge>*, Labels>>>
      series_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
