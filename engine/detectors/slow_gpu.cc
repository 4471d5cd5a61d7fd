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

std::string SlowGpuDetector::Evidence(int32_t rank, const std::vector<std::string>& hosts,
                                      const RankScore& s, double k, double min_drop) {
  const char* versus = s.own         ? " TFLOPS vs its own first windows' "
                       : s.two_ranks ? " TFLOPS vs the other rank's "
                                     : " TFLOPS vs peer median ";
  const std::string rule =
      s.own         ? std::string(" below its own first windows, calls slower as a whole")
      : s.two_ranks ? std::string(" below the other rank (two ranks: no MAD)")
                    : absl::StrCat(" and ", Fmt(k, 0), " MAD below the median");
  return absl::StrCat("rank ", rank, " on ", hosts.empty() ? "?" : hosts[0], ": GEMM ",
                      Fmt(s.worst_tflops, 1), versus, Fmt(s.worst_median, 1), " TFLOPS on '",
                      s.worst_shape, "' (", Fmt(s.worst_ratio), "x); below ",
                      s.own ? "its own first windows" : "peers", " on ", s.low, " of ", s.shapes,
                      " shapes (rule: > ", Fmt(min_drop * 100, 0), " %", rule,
                      "; GEMMs overlapping collectives excluded)");
}

std::string SlowGpuDetector::IntermittentEvidence(int32_t rank,
                                                  const std::vector<std::string>& hosts,
                                                  const RankScore& s, const WindowView& v) const {
  return absl::StrCat(
      "rank ", rank, " on ", hosts.empty() ? "?" : hosts[0], ": ", s.slow_calls, " of ", s.calls,
      " timed GEMM calls ran more than ", Fmt(Param(v, "slow_gpu.intermittent_factor"), 0),
      "x slower than the rank's typical call of their shape while the others ran at full rate, "
      "losing ",
      Fmt(s.lost_s * 1e3, 1), " ms of ", Fmt(s.gemm_s * 1e3, 1), " ms of GEMM time (",
      Fmt(100 * s.lost_s / s.gemm_s, 0), " %); worst '", s.worst_shape, "': slow calls at ",
      Fmt(s.worst_tflops, 1), " TFLOPS vs a typical ", Fmt(s.worst_median, 1),
      " TFLOPS: the device is slowed now and then, as when another process time-slices the GPU "
      "or it throttles (check for other processes on the GPU; calls overlapping the job's own "
      "work on other streams and collectives excluded)");
}

void SlowGpuDetector::RankScore::Low(double ratio, const std::string& shape, double tflops,
                                     double reference) {
  low++;
  if (ratio < worst_ratio) {
    worst_ratio = ratio;
    worst_shape = shape;
    worst_tflops = tflops;
    worst_median = reference;
  }
}

std::map<int32_t, SlowGpuDetector::RankScore> SlowGpuDetector::AgainstOwnFirstWindows(
    const JobState& job, const WindowView& v, const CallMap& calls,
    const std::map<std::string, double>& flops, double min_drop) {
  const int windows = static_cast<int>(Param(v, "history.baseline_windows"));
  // GEMMs that take only microseconds are bound by launch and tail latency
  // (on the GPU-less runtime, by the host's load), not by the device.
  const double min_ideal_us = Param(v, "unoptimized_gemm.min_ideal_us");
  absl::flat_hash_map<OwnKey, OwnGemm>& own = own_[job.job()];
  std::map<int32_t, RankScore> score;
  for (const auto& [key, c] : calls) {
    const double med = analysis::Median(c);
    OwnGemm& o = own[OwnKey{key.second, std::hash<std::string>{}(key.first)}];
    if (o.windows < windows) {
      o.windows++;
      o.median_sum += med;
      o.q25_sum += analysis::Quantile(c, 0.25);
      continue;
    }
    const double base = o.median_sum / o.windows, base_q25 = o.q25_sum / o.windows;
    auto f = flops.find(key.first);
    if (base <= 0 || f == flops.end() || f->second / (base * 1e12) * 1e6 < min_ideal_us) continue;
    RankScore& r = score[key.second];
    r.shapes++;
    if (base > 0 && med < (1 - min_drop) * base && analysis::Quantile(c, 0.75) < base_q25) {
      r.Low(med / base, key.first, med, base);
    }
  }
  return score;
}

std::map<int32_t, SlowGpuDetector::RankScore> SlowGpuDetector::IntermittentCalls(
    const JobState& job, const WindowView& v, const CallMap& calls,
    const JudgedMap& judged, const std::map<std::string, double>& flops) {
  const double factor = Param(v, "slow_gpu.intermittent_factor");
  const double min_ideal_us = Param(v, "unoptimized_gemm.min_ideal_us");
  const int windows = static_cast<int>(Param(v, "history.baseline_windows"));
  const absl::flat_hash_map<OwnKey, OwnGemm>& own = own_[job.job()];
  std::map<int32_t, RankScore> score;
  for (const auto& [key, c] : calls) {
    auto f = flops.find(key.first);
    auto j = judged.find(key);
    if (f == flops.end() || j == judged.end() || j->second.size() != c.size()) continue;
    std::vector<double> alone;
    for (size_t i = 0; i < c.size(); ++i) {
      if (j->second[i] && c[i] > 0) alone.push_back(c[i]);
    }
    if (alone.size() < 4) continue;
    // The typical call: the window's fast quartile, or the rank's own first
    // windows' median where that is faster (a GPU shared for most of the
    // window).
    double typical = analysis::Quantile(alone, 0.75);
    auto o = own.find(OwnKey{key.second, std::hash<std::string>{}(key.first)});
    if (o != own.end() && o->second.windows >= windows && o->second.windows > 0) {
      typical = std::max(typical, o->second.median_sum / o->second.windows);
    }
    if (typical <= 0 || f->second / (typical * 1e12) * 1e6 < min_ideal_us) continue;
    RankScore& r = score[key.second];
    const double typical_s = f->second / (typical * 1e12);
    double lost = 0;
    std::vector<double> slow;
    for (double tf : alone) {
      const double s_call = f->second / (tf * 1e12);
      r.gemm_s += s_call;
      r.calls++;
      if (tf * factor >= typical) continue;
      slow.push_back(tf);
      lost += s_call - typical_s;
    }
    r.slow_calls += slow.size();
    r.lost_s += lost;
    r.shapes++;
    if (!slow.empty()) {
      const double ratio = analysis::Median(slow) / typical;
      if (r.worst_shape.empty() || ratio < r.worst_ratio) {
        r.worst_ratio = ratio;
        r.worst_shape = key.first;
        r.worst_tflops = analysis::Median(slow);
        r.worst_median = typical;
      }
      r.low++;
    }
  }
  return score;
}

void SlowGpuDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double min_drop = Param(v, "slow_gpu.min_drop");
  const double k = Param(v, "slow_gpu.mad_k");
  const uint64_t min_count = static_cast<uint64_t>(Param(v, "slow_gpu.min_count"));
  const size_t min_ranks = static_cast<size_t>(Param(v, "slow_gpu.min_ranks"));
  const float min_queue_us = static_cast<float>(Param(v, "slow_gpu.intermittent_min_queue_us"));

  std::map<int32_t, double> comm_s;  // rank -> seconds in collectives
  for (const analysis::RankTrace& t : v.ranks) comm_s[t.rank] = CollectiveSeconds(t);
  // shape -> (rank, TFLOPS); (shape, rank) -> per-call TFLOPS
  std::map<std::string, std::vector<std::pair<int32_t, double>>> by_shape;
  CallMap calls;
  JudgedMap judged;
  std::map<std::string, double> flops;  // shape -> FLOP per call
  for (const analysis::RankTrace& t : v.ranks) {
    for (const auto& [key, g] : v.GemmsOf(t)) {
      if (g.count < min_count) continue;
      flops[key] = g.sig.flops;
      by_shape[key].emplace_back(t.rank, g.Tflops());
      calls[{key, t.rank}] = g.call_tflops;
      std::vector<uint8_t>& j = judged[{key, t.rank}];
      j.resize(g.call_concurrent.size());
      for (size_t i = 0; i < j.size(); ++i) {
        j[i] = !g.call_concurrent[i] && g.call_issue_us[i] >= min_queue_us;
      }
    }
  }
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
        s.two_ranks = true;
        s.Low(slow.second / fast.second, key, slow.second, fast.second);
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
    for (size_t i : low) score[rows[i].first].Low(rows[i].second / med, key, rows[i].second, med);
  }
  // Where the peers single no rank out, each rank against its own first
  // windows (one rank; every rank slowed alike).
  for (auto& [rank, s] : AgainstOwnFirstWindows(job, v, calls, flops, min_drop)) {
    const RankScore& peers = score[rank];
    if (peers.low > 0 && 2 * peers.low >= peers.shapes) continue;
    if (s.low == 0 || 2 * s.low < s.shapes) continue;
    s.own = true;
    score[rank] = s;
  }
  // Calls slowed now and then (a time-sliced GPU), for ranks that no rule
  // above names and that do not wait for a peer.
  double least_comm_s = comm_s.empty() ? 0 : comm_s.begin()->second;
  for (const auto& [rank, c] : comm_s) least_comm_s = std::min(least_comm_s, c);
  const double share = Param(v, "slow_gpu.intermittent_share");
  for (auto& [rank, s] : IntermittentCalls(job, v, calls, judged, flops)) {
    const RankScore& before = score[rank];
    if (before.low > 0 && 2 * before.low >= before.shapes) continue;
    if (s.gemm_s <= 0 || s.lost_s < share * s.gemm_s) continue;
    if (least_comm_s > 0 && comm_s[rank] > kWaitRatio * least_comm_s) continue;
    s.intermittent = true;
    score[rank] = s;
  }
  Streaks::Window held = streaks_.Begin(job.job());
  for (const auto& [rank, s] : score) {
    if (!s.intermittent && (s.low == 0 || 2 * s.low < s.shapes)) continue;
    // Two ranks, or a rank against itself: once more next window.
    if ((s.two_ranks || s.own || s.intermittent) && held.Hold(absl::StrCat(rank)) < 2) continue;
    Diagnosis d = NewDiagnosis(job, "slow_gpu", Team::kOperations);
    d.ranks = {rank};
    d.hosts = HostsOf(v, d.ranks);
    d.subject = absl::StrCat("rank:", rank);
    d.evidence = s.intermittent ? IntermittentEvidence(rank, d.hosts, s, v)
                                : Evidence(rank, d.hosts, s, k, min_drop);
    d.severity = (s.intermittent ? s.lost_s / s.gemm_s > 0.4 : s.worst_ratio < 0.6)
                     ? Severity::kCritical
                     : Severity::kWarning;
    sink.Report(std::move(d));
  }
}

}  // namespace xpu::engine
