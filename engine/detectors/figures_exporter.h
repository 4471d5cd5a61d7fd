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
//   xpu_job_rank_figure{figure,stat}        min, median, max of each
//                                           figure over the job's ranks
// Every rank's series carries its labels (RankLabels: xpu_job, xpu_job_name,
// rank, Hostname, gpu, UUID, modelName). A job of more than
// figures.gauge_max_ranks ranks keeps the gauges of the
// figures.standout_ranks ranks furthest below and above each figure's
// median only. A gauge keeps its last value while a window has no data for
// it; series are tracked in the JobSeries, which removes them with the job
// (retention).
#ifndef XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
#define XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_

#include <map>
#include <set>
#include <utility>
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
  // The figures, in this order (FiguresExporter::specs_).
  enum Figure { kStep, kInter, kMinority, kDataloader, kFlops, kBusbw };
  struct FigureSpec {
    prometheus::Family<prometheus::Gauge>* family;
    const char* kind;  // the kind label ("" = none)
    const char* name;  // the figure label of xpu_job_rank_figure
  };
  using RankValue = std::pair<double, size_t>;  // value, index into the view's ranks

  // Sets the gauges from each figure's values (by Figure): every rank's in
  // a job of up to figures.gauge_max_ranks ranks, else the ranks that stand
  // out; and each figure's spread over the job.
  void Publish(const std::string& job, const WindowView& v, const prometheus::Labels& job_labels,
               std::vector<std::vector<RankValue>>* values);
  void DropRankHistograms(const std::string& job);

  JobSeries& series_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& flops_;
  prometheus::Family<prometheus::Gauge>& busbw_;
  prometheus::Family<prometheus::Histogram>& issue_;
  prometheus::Family<prometheus::Gauge>& void_;
  prometheus::Family<prometheus::Gauge>& dataloader_;
  prometheus::Family<prometheus::Gauge>& spread_;
  const std::vector<FigureSpec> specs_;
  // Per job of more than figures.gauge_max_ranks ranks: the (figure, slot)
  // series shown, so that a rank that no longer stands out loses them.
  std::map<std::string, std::set<std::pair<size_t, std::string>>> shown_;
  std::set<std::string> pooled_jobs_;  // jobs whose histograms are pooled
};

// The rank label of a histogram pooled over a job's ranks.
inline constexpr char kAllRanks[] = "all";

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_FIGURES_EXPORTER_H_
