#include "engine/detectors/figures_exporter.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "common/analysis/collective.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {
namespace {
prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const char* name,
                                             const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

// Observes every sample (in µs) at once: one ObserveMultiple per window.
void ObserveAll(prometheus::Histogram& h, const std::vector<double>& us,
                const std::vector<double>& bounds) {
  std::vector<double> counts(bounds.size() + 1, 0.0);
  double sum = 0;
  for (double v : us) {
    const double s = v * 1e-6;
    sum += s;
    const size_t b = std::lower_bound(bounds.begin(), bounds.end(), s) - bounds.begin();
    counts[b] += 1;  // b == bounds.size(): +Inf
  }
  h.ObserveMultiple(counts, sum);
}

}  // namespace

const std::vector<double>& FiguresExporter::IssueLatencyBuckets() {
  // 1 µs .. 1 s: the healthy range (a few µs to a few hundred µs) in 1-2.5-5
  // steps, stalls in decades.
  static const auto* b = new std::vector<double>{1e-6,   2.5e-6, 5e-6,   1e-5,   2.5e-5,
                                                 5e-5,   1e-4,   2.5e-4, 5e-4,   1e-3,
                                                 2.5e-3, 1e-2,   1e-1,   1.0};
  return *b;
}

FiguresExporter::FiguresExporter(std::shared_ptr<WindowViews> views,
                                 std::shared_ptr<const DetectorConfig> config,
                                 prometheus::Registry& registry, JobSeries& series)
    : ViewDetector(std::move(views), std::move(config)),
      series_(series),
      step_(Gauge(registry, "xpu_rank_step_seconds",
                  "Mean step time of a rank over the last window")),
      flops_(Gauge(registry, "xpu_rank_gemm_flop_per_second",
                   "GEMM throughput of a rank in floating-point operations per second "
                   "(GPU-timed, not overlapping collectives), last window")),
      busbw_(
          Gauge(registry, "xpu_rank_busbw_bytes_per_second",
                "Last-arrival bus bandwidth of the collectives a rank took part in, last window")),
      issue_(prometheus::BuildHistogram()
                 .Name("xpu_rank_issue_latency_seconds")
                 .Help("Kernel issue latency (GPU start - CPU launch) of a rank by kernel family")
                 .Register(registry)),
      void_(Gauge(registry, "xpu_rank_void_ratio",
                  "Void percentages V_inter and V_minority of a rank (0..1), last window")),
      dataloader_(Gauge(registry, "xpu_rank_dataloader_ratio",
                        "DataLoader time / step time of a rank (0..1), last window")) {}

void FiguresExporter::Set(const std::string& job, prometheus::Family<prometheus::Gauge>& f,
                          const prometheus::Labels& labels, double v) {
  const std::string slot = labels.at(kRankLabel) + "/" +
                           (labels.count("kind") ? labels.at("kind") : std::string());
  if (prometheus::Gauge* g = series_.Get(job, f, slot, labels)) g->Set(v);
}

void FiguresExporter::DropRankHistograms(const std::string& job) {
  // Once per job: the per-rank histograms made while it was smaller.
  if (pooled_jobs_.insert(job).second) series_.RemoveFamily(job, issue_);
}

void FiguresExporter::OnWindow(const JobState& job, DiagnosisSink& /*sink*/) {
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty() || series_.Retired(job.job())) return;
  // The job's name and the ranks' identities as the view copied them: the
  // exporter runs without the job's lock.
  const prometheus::Labels job_labels = JobLabels(job.job(), v.backbone);
  const std::vector<analysis::CommBandwidth> comms = analysis::CommunicatorBandwidth(v.ranks);
  // Per rank, the bus bytes and seconds of the communicators it is in,
  // summed in the communicators' order (one pass over their members).
  std::unordered_map<int32_t, std::pair<double, double>> bus;  // rank -> (bytes, seconds)
  for (const auto& c : comms) {
    for (int32_t r : c.ranks) {
      std::pair<double, double>& b = bus[r];
      b.first += c.bus_bytes;
      b.second += c.seconds;
    }
  }
  // Issue latencies per rank up to figures.histogram_max_ranks ranks; a
  // larger job's are pooled into one histogram per family (rank="all"): a
  // histogram per rank and family is the largest figure the engine holds
  // per rank, and 100k ranks' worth is more series than a Prometheus takes.
  const bool per_rank_histograms =
      v.ranks.size() <= static_cast<size_t>(Param(v, "figures.histogram_max_ranks"));
  if (!per_rank_histograms) DropRankHistograms(job.job());
  std::map<std::string, prometheus::Histogram*> pooled;  // family -> rank="all" histogram
  for (const analysis::RankTrace& t : v.ranks) {
    const std::string rank = std::to_string(t.rank);
    const prometheus::Labels base = RankLabels(job_labels, rank, v.IdentityOf(t.rank));
    const analysis::Steps& st = v.StepsOf(t);
    std::vector<double> d = st.DurationsS();
    if (!d.empty()) {
      Set(job.job(), step_, base, analysis::Mean(d));
      analysis::VoidFigures f = analysis::ComputeVoid(t, st);
      if (f.steps > 0) {
        prometheus::Labels inter = base, minority = base;
        inter["kind"] = "inter";
        minority["kind"] = "minority";
        Set(job.job(), void_, inter, f.VInter());
        Set(job.job(), void_, minority, f.VMinority());
        if (f.inter_from_dataloader) Set(job.job(), dataloader_, base, f.dataloader_s / f.step_s);
      }
    }
    double flops = 0, ns = 0;
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      flops += g.flops;
      ns += static_cast<double>(g.total_ns);
    }
    if (ns > 0) Set(job.job(), flops_, base, flops / (ns * 1e-9));
    auto b = bus.find(t.rank);
    if (b != bus.end() && b->second.second > 0) {
      Set(job.job(), busbw_, base, b->second.first / b->second.second);
    }
    for (auto fam : {analysis::KernelFamily::kCompute, analysis::KernelFamily::kCommunication}) {
      std::vector<double> lat = analysis::IssueLatenciesUs(t, fam);
      if (lat.empty()) continue;
      const std::string family = fam == analysis::KernelFamily::kCompute ? "compute" : "communication";
      prometheus::Histogram* h = nullptr;
      if (per_rank_histograms) {
        prometheus::Labels l = base;
        l["family"] = family;
        h = series_.Get(job.job(), issue_, rank + "/" + family, l, IssueLatencyBuckets());
      } else {
        h = pooled[family];
        if (h == nullptr) {
          prometheus::Labels l = job_labels;
          l[kRankLabel] = kAllRanks;
          l["family"] = family;
          h = pooled[family] = series_.Get(job.job(), issue_, std::string(kAllRanks) + "/" + family,
                                           l, IssueLatencyBuckets());
        }
      }
      if (h != nullptr) ObserveAll(*h, lat, IssueLatencyBuckets());
    }
  }
}

}  // namespace xpu::engine
