#include "engine/detectors/figures_exporter.h"

#include <algorithm>
#include <cmath>
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
                        "DataLoader time / step time of a rank (0..1), last window")),
      spread_(Gauge(registry, "xpu_job_rank_figure",
                    "Lowest (stat=\"min\"), median and highest (\"max\") value of a per-rank "
                    "figure over a job's ranks, last window")),
      // In the order of the Figure enum.
      specs_({{&step_, "", "step_seconds"},
              {&void_, "inter", "void_inter"},
              {&void_, "minority", "void_minority"},
              {&dataloader_, "", "dataloader_ratio"},
              {&flops_, "", "gemm_flop_per_second"},
              {&busbw_, "", "busbw_bytes_per_second"}}) {}

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
  const std::vector<analysis::CommBandwidth>& comms = v.Communicators();
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
  // Each gauge's value per rank (index into v.ranks), published after the
  // pass: a job of more than figures.gauge_max_ranks ranks shows only the
  // ranks that stand out (Publish).
  std::vector<std::vector<RankValue>> figures(specs_.size());
  for (size_t i = 0; i < v.ranks.size(); ++i) {
    const analysis::RankTrace& t = v.ranks[i];
    const analysis::Steps& st = v.StepsOf(t);
    std::vector<double> d = st.DurationsS();
    if (!d.empty()) {
      figures[kStep].emplace_back(analysis::Mean(d), i);
      const analysis::VoidFigures& f = v.VoidOf(t);
      if (f.steps > 0) {
        figures[kInter].emplace_back(f.VInter(), i);
        figures[kMinority].emplace_back(f.VMinority(), i);
        if (f.inter_from_dataloader) {
          figures[kDataloader].emplace_back(f.dataloader_s / f.step_s, i);
        }
      }
    }
    double flops = 0, ns = 0;
    for (const auto& [key, g] : v.GemmsOf(t)) {
      flops += g.flops;
      ns += static_cast<double>(g.total_ns);
    }
    if (ns > 0) figures[kFlops].emplace_back(flops / (ns * 1e-9), i);
    auto b = bus.find(t.rank);
    if (b != bus.end() && b->second.second > 0) {
      figures[kBusbw].emplace_back(b->second.first / b->second.second, i);
    }
    for (auto fam : {analysis::KernelFamily::kCompute, analysis::KernelFamily::kCommunication}) {
      std::vector<double> lat = analysis::IssueLatenciesUs(t, fam);
      if (lat.empty()) continue;
      const std::string family = fam == analysis::KernelFamily::kCompute ? "compute" : "communication";
      prometheus::Histogram* h = nullptr;
      if (per_rank_histograms) {
        const std::string rank = std::to_string(t.rank);
        prometheus::Labels l = RankLabels(job_labels, rank, v.IdentityOf(t.rank));
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
  Publish(job.job(), v, job_labels, &figures);
}

void FiguresExporter::Publish(const std::string& job, const WindowView& v,
                              const prometheus::Labels& job_labels,
                              std::vector<std::vector<RankValue>>* values) {
  const bool every_rank =
      v.ranks.size() <= static_cast<size_t>(Param(v, "figures.gauge_max_ranks"));
  const size_t side = static_cast<size_t>(std::max(0.0, Param(v, "figures.standout_ranks")));
  std::set<std::pair<size_t, std::string>>* shown = nullptr;  // (figure, slot)
  if (!every_rank) {
    auto [it, fresh] = shown_.try_emplace(job);
    if (fresh) {
      // Once per job: the per-rank gauges made while it was smaller.
      for (const FigureSpec& f : specs_) series_.RemoveFamily(job, *f.family);
    }
    shown = &it->second;
  }
  std::set<std::pair<size_t, std::string>> now_shown;
  for (size_t fi = 0; fi < specs_.size(); ++fi) {
    const FigureSpec& f = specs_[fi];
    std::vector<RankValue>& vals = (*values)[fi];
    // The values that are numbers (a NaN has no order): the spread's and,
    // in a large job, the standouts'.
    std::vector<RankValue> sorted;
    sorted.reserve(vals.size());
    for (const RankValue& e : vals) {
      if (std::isfinite(e.first)) sorted.push_back(e);
    }
    if (!every_rank) vals = sorted;
    if (vals.empty()) {
      // No data this window: the gauges keep their last values.
      if (shown != nullptr) {
        for (auto it = shown->lower_bound({fi, ""}); it != shown->end() && it->first == fi; ++it)
          now_shown.insert(*it);
      }
      continue;
    }
    double median = 0;
    if (!sorted.empty()) {
      // The job's spread: lowest, median and highest of the ranks' values.
      const auto mid = sorted.begin() + static_cast<long>(sorted.size() / 2);
      std::nth_element(sorted.begin(), mid, sorted.end());
      median = mid->first;
      const auto [lo, hi] = std::minmax_element(sorted.begin(), sorted.end());
      for (const auto& [q, x] : {std::pair<const char*, double>{"min", lo->first},
                                 {"median", median},
                                 {"max", hi->first}}) {
        prometheus::Labels l = job_labels;
        l["figure"] = f.name;
        l["stat"] = q;
        if (prometheus::Gauge* g = series_.Get(job, spread_, std::string(f.name) + "/" + q, l)) {
          g->Set(x);
        }
      }
    }
    if (!every_rank && vals.size() > 2 * side) {
      // The ranks furthest from the median on either side.
      auto far = [median](const RankValue& a, const RankValue& b) {
        return std::abs(a.first - median) > std::abs(b.first - median);
      };
      std::vector<RankValue> below, above;
      for (const RankValue& e : vals) (e.first < median ? below : above).push_back(e);
      for (std::vector<RankValue>* part : {&below, &above}) {
        const auto k = static_cast<long>(std::min(side, part->size()));
        std::partial_sort(part->begin(), part->begin() + k, part->end(), far);
        part->resize(static_cast<size_t>(k));
      }
      vals = std::move(below);
      vals.insert(vals.end(), above.begin(), above.end());
    }
    for (const auto& [x, i] : vals) {
      const int32_t r = v.ranks[i].rank;
      const std::string rank = std::to_string(r);
      prometheus::Labels l = RankLabels(job_labels, rank, v.IdentityOf(r));
      if (f.kind[0] != '\0') l["kind"] = f.kind;
      const std::string slot = rank + "/" + f.kind;
      if (prometheus::Gauge* g = series_.Get(job, *f.family, slot, l)) g->Set(x);
      if (shown != nullptr) now_shown.emplace(fi, slot);
    }
  }
  if (shown == nullptr) return;
  // Ranks that stood out before and no longer do lose their series.
  for (const auto& [fi, slot] : *shown) {
    if (!now_shown.count({fi, slot})) series_.Remove(job, *specs_[fi].family, slot);
  }
  *shown = std::move(now_shown);
}

}  // namespace xpu::engine
