#include "engine/detectors/figures_exporter.h"

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
}  // namespace

FiguresExporter::FiguresExporter(std::shared_ptr<WindowViews> views,
                                 std::shared_ptr<const DetectorConfig> config,
                                 prometheus::Registry& registry)
    : ViewDetector(std::move(views), std::move(config)),
      step_(Gauge(registry, "xpu_rank_step_seconds",
                  "Mean step time of a rank over the last window")),
      tflops_(Gauge(registry, "xpu_rank_gemm_tflops",
                    "GEMM TFLOPS of a rank (GPU-timed, not overlapping collectives), last window")),
      busbw_(
          Gauge(registry, "xpu_rank_busbw_bytes_per_second",
                "Last-arrival bus bandwidth of the collectives a rank took part in, last window")),
      issue_(Gauge(registry, "xpu_rank_issue_latency_seconds",
                   "Kernel issue latency quantiles of a rank by kernel family, last window")),
      void_(Gauge(registry, "xpu_rank_void_ratio",
                  "Void percentages V_inter and V_minority of a rank (0..1)")),
      dataloader_(
          Gauge(registry, "xpu_rank_dataloader_share", "DataLoader time / step time of a rank")) {}

void FiguresExporter::Set(prometheus::Family<prometheus::Gauge>& f, const Labels& labels,
                          double v) {
  f.Add(labels).Set(v);
  series_[labels.at("job")].insert({&f, labels});
}

void FiguresExporter::OnWindow(const JobState& job, DiagnosisSink& /*sink*/) {
  const WindowView& v = views_->Get(job);
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
  for (const analysis::RankTrace& t : v.ranks) {
    const std::string rank = std::to_string(t.rank);
    const Labels base = {{"job", job.job()}, {"rank", rank}};
    analysis::Steps st = analysis::FindSteps(t);
    std::vector<double> d = st.DurationsS();
    if (!d.empty()) {
      Set(step_, base, analysis::Mean(d));
      analysis::VoidFigures f = analysis::ComputeVoid(t, st);
      if (f.steps > 0) {
        Labels inter = base, minority = base;
        inter["kind"] = "inter";
        minority["kind"] = "minority";
        Set(void_, inter, f.VInter());
        Set(void_, minority, f.VMinority());
        if (f.inter_from_dataloader) Set(dataloader_, base, f.dataloader_s / f.step_s);
      }
    }
    double flops = 0, ns = 0;
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      flops += g.flops;
      ns += static_cast<double>(g.total_ns);
    }
    if (ns > 0) Set(tflops_, base, flops / (ns * 1e-9) / 1e12);
    auto b = bus.find(t.rank);
    if (b != bus.end() && b->second.second > 0) {
      Set(busbw_, base, b->second.first / b->second.second);
    }
    for (auto fam : {analysis::KernelFamily::kCompute, analysis::KernelFamily::kCommunication}) {
      std::vector<double> lat = analysis::IssueLatenciesUs(t, fam);
      if (lat.empty()) continue;
      for (double q : {0.1, 0.5, 0.9}) {
        Labels l = base;
        l["family"] = fam == analysis::KernelFamily::kCompute ? "compute" : "communication";
        l["quantile"] = q == 0.1 ? "0.1" : q == 0.5 ? "0.5" : "0.9";
        Set(issue_, l, analysis::Quantile(lat, q) * 1e-6);
      }
    }
  }
}

void FiguresExporter::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  for (auto it = series_.begin(); it != series_.end();) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    for (const auto& [family, labels] : it->second) family->Remove(&family->Add(labels));
    it = series_.erase(it);
  }
}

}  // namespace xpu::engine
