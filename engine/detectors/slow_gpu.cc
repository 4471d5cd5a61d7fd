#include "engine/detectors/slow_gpu.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"

namespace xpu::engine {
namespace {

// A slow device slows its calls as a whole: the slower rank's upper quartile
// stays under the faster rank's lower quartile. Calls of two healthy ranks
// whose times spread (kernels delayed by a busy host, a shared core) overlap.
bool TwoRanksApart(const std::vector<double>& slow, const std::vector<double>& fast) {
  return analysis::Quantile(slow, 0.75) < analysis::Quantile(fast, 0.25);
}

// Time the rank spent in collectives in the window: GPU-timed records where
// it has them, else the launch-to-completion spans.
double CollectiveSeconds(const analysis::RankTrace& t) {
  double timed = 0, untimed = 0;
  for (const analysis::Op& op : t.ops) {
    if (!xpu_op_is_collective(op.kind)) continue;
    (op.timed() ? timed : untimed) += static_cast<double>(op.dur_ns) * 1e-9;
  }
  return timed > 0 ? timed : untimed;
}

// A slow GPU makes its peers wait for it in the collectives; a rank that
// waits clearly longer there than its peer (kWaitRatio) is held up by that
// peer (a host stall, synchronizations there), and its slower GEMMs are not
// its device's doing (on the GPU-less runtime a rank that waited for a
// synchronizing peer ran its GEMMs 0.08x the peer's).
constexpr double kWaitRatio = 1.2;

}  // namespace

void SlowGpuDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double min_drop = Param(v, "slow_gpu.min_drop");
  const double k = Param(v, "slow_gpu.mad_k");
  const uint64_t min_count = static_cast<uint64_t>(Param(v, "slow_gpu.min_count"));
  const size_t min_ranks = static_cast<size_t>(Param(v, "slow_gpu.min_ranks"));

  std::map<int32_t, double> comm_s;  // rank -> seconds in collectives
  for (const analysis::RankTrace& t : v.ranks) comm_s[t.rank] = CollectiveSeconds(t);
  // shape -> (rank, TFLOPS); (shape, rank) -> per-call TFLOPS
  std::map<std::string, std::vector<std::pair<int32_t, double>>> by_shape;
  std::map<std::pair<std::string, int32_t>, std::vector<double>> calls;
  for (const analysis::RankTrace& t : v.ranks) {
    for (auto& [key, g] : analysis::GemmTflops(t)) {
      if (g.count < min_count) continue;
      by_shape[key].emplace_back(t.rank, g.Tflops());
      calls[{key, t.rank}] = std::move(g.call_tflops);
    }
  }
  struct RankScore {
    int shapes = 0, low = 0;
    double worst_ratio = 1;
    std::string worst_shape;
    double worst_tflops = 0, worst_median = 0;
    bool two_ranks = false;  // compared with the only other rank, not a peer median
  };
  std::map<int32_t, RankScore> score;
  for (const auto& [key, rows] : by_shape) {
    if (rows.size() == 2 && min_ranks > 2) {
      // Two ranks have no peer majority (the MAD of two values never
      // singles one out): the slower one is low when its median call is
      // min_drop below the other's and its calls are slower as a whole
      // (TwoRanksApart): a few calls that the host or a shared core delayed
      // move a sum of durations, not a slow device's every call.
      std::vector<std::pair<int32_t, double>> med = rows;
      for (auto& r : med) r.second = analysis::Median(calls[{key, r.first}]);
      const bool first_slower = med[0].second < med[1].second;
      const auto& slow = med[first_slower ? 0 : 1];
      const auto& fast = med[first_slower ? 1 : 0];
      score[slow.first].shapes++;
      score[fast.first].shapes++;
      if (fast.second > 0 && slow.second < (1 - min_drop) * fast.second &&
          TwoRanksApart(calls[{key, slow.first}], calls[{key, fast.first}]) &&
          comm_s[slow.first] <= kWaitRatio * comm_s[fast.first]) {
        RankScore& s = score[slow.first];
        s.low++;
        s.two_ranks = true;
        const double ratio = slow.second / fast.second;
        if (ratio < s.worst_ratio) {
          s.worst_ratio = ratio;
          s.worst_shape = key;
          s.worst_tflops = slow.second;
          s.worst_median = fast.second;
        }
      }
      continue;
    }
    if (rows.size() < min_ranks) continue;
    std::vector<double> vals;
    for (const auto& r : rows) vals.push_back(r.second);
    const double med = analysis::Median(vals);
    if (med <= 0) continue;
    std::vector<size_t> low = analysis::MadOutliers(vals, k, analysis::Tail::kLow, min_drop);
    for (const auto& r : rows) score[r.first].shapes++;
    for (size_t i : low) {
      RankScore& s = score[rows[i].first];
      s.low++;
      double ratio = rows[i].second / med;
      if (ratio < s.worst_ratio) {
        s.worst_ratio = ratio;
        s.worst_shape = key;
        s.worst_tflops = rows[i].second;
        s.worst_median = med;
      }
    }
  }
  Streaks::Window held = streaks_.Begin(job.job());
  for (const auto& [rank, s] : score) {
    if (s.low == 0 || 2 * s.low < s.shapes) continue;
    if (s.two_ranks && held.Hold(absl::StrCat(rank)) < 2) continue;  // once more next window
    Diagnosis d = NewDiagnosis(job, "slow_gpu", Team::kOperations);
    d.ranks = {rank};
    d.hosts = HostsOf(v, d.ranks);
    d.subject = absl::StrCat("rank:", rank);
    d.severity = s.worst_ratio < 0.6 ? Severity::kCritical : Severity::kWarning;
    d.evidence =
        absl::StrCat("rank ", rank, " on ", d.hosts.empty() ? "?" : d.hosts[0], ": GEMM ",
                     Fmt(s.worst_tflops, 1),
                     s.two_ranks ? " TFLOPS vs the other rank's " : " TFLOPS vs peer median ",
                     Fmt(s.worst_median, 1), " TFLOPS on '", s.worst_shape, "' (",
                     Fmt(s.worst_ratio), "x); below peers on ", s.low, " of ", s.shapes,
                     " shapes (rule: > ", Fmt(min_drop * 100, 0), " %",
                     s.two_ranks ? " below the other rank (two ranks: no MAD)"
                                 : absl::StrCat(" and ", Fmt(k, 0), " MAD below the median"),
                     "; GEMMs overlapping collectives excluded)");
    sink.Report(std::move(d));
  }
}

}  // namespace xpu::engine
