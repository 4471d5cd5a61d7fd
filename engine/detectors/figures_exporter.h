// figures_exporter — publishes the per-rank analysis figures of each window
// as Prometheus series (for the Grafana dashboards in docker/grafana/); it
// runs in the detector loop but reports no diagnosis.
//
//   xpu_rank_step_seconds                   mean step time
//   xpu_rank_gemm_flop_per_second           GEMM throughput (timed, no overlap)
//   xpu_rank_busbw_bytes_per_second         last-arrival busbw of the
//                                           collectives the rank took part in
//   xpu_rank_issue_latency_seconds{family}  histogram: every issue-latency
//                                           sample of the window is observed;
//                                           pooled over the job's ranks
//                                           (rank="all") for a job of more
//                                           than figures.histogram_max_ranks
//   xpu_rank_void_ratio{kind="inter"|"minority"}
//   xpu_rank_dataloader_ratio               DataLoader time / step time
// Every series carries the rank's labels (RankLabels: xpu_job, xpu_job_name,
// rank, Hostname, gpu, UUID, modelName). A gauge keeps its last value while a
// window has no data for it; series are tracked in the JobSeries, which
// removes them with the job (retention).
#ifndef XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
#define XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_

#include <set>
#include <string>
#include <vector>

#include "engine/state/job_series.h"
#include "engine/window/window_view.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace xpu::engine {

class FiguresExporter : public ViewDetector {
 public:
  FiguresExporter(std::shared_ptr<WindowViews> views, std::shared_ptr<const DetectorConfig> config,
                  prometheus::Registry& registry, JobSeries& series);
  std::string_view name() const override { return "figures"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

  // Upper bounds of the issue-latency histogram buckets, in seconds.
  static const std::vector<double>& IssueLatencyBuckets();

 private:
  void Set(const std::string& job, prometheus::Family<prometheus::Gauge>& f,
           const prometheus::Labels& labels, double v);
  void DropRankHistograms(const std::string& job);

  JobSeries& series_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& flops_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Family<prometheus::Histogram>& issue_;
  prometheus::Family<prometheus::Gauge>& void_;
  prometheus::Family<prometheus::Gauge>& dataloader_;
  std::set<std::string> pooled_jobs_;  // jobs whose histograms are pooled
};

// The rank label of a histogram pooled over a job's ranks.
inline constexpr char kAllRanks[] = "all";

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
