#include "engine/detectors/slow_dataloader.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"

namespace xpu::engine {

void SlowDataloaderDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double min_share = Param(v, "dataloader.min_share");
  const double abs_share = Param(v, "dataloader.abs_share");
  const double k = Param(v, "dataloader.mad_k");
  std::vector<int32_t> ranks;
  std::vector<double> share, dl_ms_per_step;
  for (const analysis::RankTrace& t : v.ranks) {
    const analysis::VoidFigures& f = v.VoidOf(t);
    if (f.steps == 0 || !f.inter_from_dataloader) continue;
    ranks.push_back(t.rank);
    share.push_back(f.dataloader_s / f.step_s);
    dl_ms_per_step.push_back(f.dataloader_s * 1e3 / static_cast<double>(f.steps));
  }
  if (ranks.empty()) return;
  std::vector<size_t> high = analysis::MadOutliers(share, k, analysis::Tail::kHigh, 0.5);
  std::vector<bool> is_high(share.size(), false);
  for (size_t i : high) is_high[i] = true;
  const double med = analysis::Median(share);
  Diagnosis d = NewDiagnosis(job, "slow_dataloader", Team::kAlgorithm);
  std::vector<std::string> lines;
  for (size_t i = 0; i < share.size(); ++i) {
    if (share[i] < min_share || !(is_high[i] || share[i] >= abs_share)) continue;
    d.ranks.push_back(ranks[i]);
    lines.push_back(absl::StrCat("rank ", ranks[i], " ", Fmt(share[i] * 100, 1), " % (",
                                 Fmt(dl_ms_per_step[i], 1), " ms per step)"));
  }
  if (d.ranks.empty()) return;
  d.hosts = HostsOf(v, d.ranks);
  d.subject =
      d.ranks.size() == ranks.size() ? "all" : absl::StrCat("ranks:", absl::StrJoin(d.ranks, ","));
  d.severity = Severity::kWarning;
  d.evidence = absl::StrCat("DataLoader time share of the step: ", absl::StrJoin(lines, ", "),
                            "; median over ", ranks.size(), " ranks ", Fmt(med * 100, 1),
                            " % (rule: >= ", Fmt(min_share * 100, 0), " % and beyond median + ",
                            Fmt(k, 0), " MAD, or >= ", Fmt(abs_share * 100, 0), " %)");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
