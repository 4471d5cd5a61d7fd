#include "engine/detectors/unoptimized_gemm.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"

namespace xpu::engine {

void UnoptimizedGemmDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double ratio = Param(v, "unoptimized_gemm.ratio");
  const double min_flops = Param(v, "unoptimized_gemm.min_gflop") * 1e9;
  const double min_ideal_us = Param(v, "unoptimized_gemm.min_ideal_us");
  const double peak = Param(v, "unoptimized_gemm.peak_tflops");
  const uint64_t min_count = static_cast<uint64_t>(Param(v, "slow_gpu.min_count"));

  struct Shape {
    analysis::OpSig sig;
    std::vector<double> tflops;
    std::vector<int32_t> ranks;
  };
  std::map<std::string, Shape> shapes;
  for (const analysis::RankTrace& t : v.ranks) {
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      if (g.count < min_count || g.sig.flops < min_flops) continue;
      Shape& s = shapes[key];
      s.sig = g.sig;
      s.tflops.push_back(g.Tflops());
      s.ranks.push_back(t.rank);
    }
  }
  std::map<uint8_t, double>& best = best_[job.job()];
  std::map<std::string, double>& shape_best = shape_best_[job.job()];
  for (const auto& [key, s] : shapes) {
    double med = analysis::Median(s.tflops);
    best[s.sig.dtype] = std::max(best[s.sig.dtype], med);
    shape_best[key] = std::max(shape_best[key], med);
  }
  // "Every rank" means a real majority of the window's ranks ran the shape
  // enough times: a shape seen on one or two ranks of a large job says
  // nothing about the kernel (noise, or a rank-specific op). A job with
  // fewer ranks than slow_gpu.min_ranks needs all of them.
  const size_t min_ranks =
      std::min<size_t>(std::max<size_t>(static_cast<size_t>(Param(v, "slow_gpu.min_ranks")),
                                        (v.ranks.size() + 1) / 2),
                       std::max<size_t>(v.ranks.size(), 1));
  const history::JobHistory* jh = history_ != nullptr ? &history_->Get(job) : nullptr;
  const int min_runs = static_cast<int>(Param(v, "history.min_runs"));
  Streaks::Window held = streaks_.Begin(job.job());
  for (const auto& [key, s] : shapes) {
    if (s.ranks.size() < min_ranks) continue;
    double reference = best[s.sig.dtype];
    std::string source = "best shape of this job";
    const history::GemmCalibrationRow* cal =
        jh != nullptr ? jh->calibration.Gemm(history::GemmDtypeClass(s.sig.dtype)) : nullptr;
    if (peak > 0) {
      reference = peak;
      source = "configured peak";
    } else if (cal != nullptr) {
      reference = cal->tflops;
      source = absl::StrCat("calibrated ", cal->dtype, " peak of ", cal->gpu_model,
                            ", xpu calibrate on ", cal->host);
    }
    // A GEMM that would take only microseconds at the reference rate is
    // bound by launch and tail latency, not by its kernel choice (the
    // launch-bound GPT's 512-wide GEMMs: 1 to 17 GFLOP, 1 to 22 us at an
    // H200's peak).
    if (reference > 0 && s.sig.flops / (reference * 1e12) * 1e6 < min_ideal_us) continue;
    const double top = *std::max_element(s.tflops.begin(), s.tflops.end());
    const bool below_reference = reference > 0 && top < ratio * reference;
    // The same signature in previous runs of the job name on this GPU model.
    const history::HistoryFigure* prev = nullptr;
    if (jh != nullptr) {
      auto it = jh->baseline.gemm_tflops.find(history::StableGemmKey(s.sig));
      if (it != jh->baseline.gemm_tflops.end() && it->second.runs >= min_runs &&
          it->second.value > 0) {
        prev = &it->second;
      }
    }
    const bool below_history = prev != nullptr && top < ratio * prev->value;
    if (!below_reference && !below_history) continue;
    // A shape that reached its reference earlier in this job has a good
    // kernel: what slowed it since is the device (slow_gpu), not the
    // kernel choice.
    const double earlier = shape_best[key];
    if ((!below_reference || earlier >= ratio * reference) &&
        (!below_history || earlier >= ratio * prev->value)) {
      continue;
    }
    // A kernel choice is a property of the shape: it is reported once two
    // consecutive windows agree, so that a window of start-up effects
    // (first calls, clocks ramping up) is not taken for one.
    if (held.Hold(key) < 2) continue;
    Diagnosis d = NewDiagnosis(job, "unoptimized_gemm", Team::kInfrastructure);
    d.ranks = s.ranks;
    d.hosts = HostsOf(v, d.ranks);
    d.subject = key;
    d.severity = Severity::kWarning;
    std::vector<std::string> why = analysis::AlignmentIssues(s.sig);
    std::vector<std::string> against;
    if (below_reference) {
      against.push_back(absl::StrCat("reference ", Fmt(reference, 1), " TFLOPS (", source,
                                     "): ", Fmt(top / reference), "x < ", Fmt(ratio), "x"));
    }
    if (below_history) {
      against.push_back(absl::StrCat(Fmt(prev->value, 1), " TFLOPS of the same GEMM in ",
                                     jh->baseline.Describe(prev->runs), ": ",
                                     Fmt(top / prev->value), "x < ", Fmt(ratio), "x"));
    }
    d.evidence = absl::StrCat(
        "GEMM '", key, "' (", Fmt(s.sig.flops / 1e9, 1), " GFLOP per call) reaches at most ",
        Fmt(top, 1), " TFLOPS (median ", Fmt(analysis::Median(s.tflops), 1), ") on all ",
        s.ranks.size(), " ranks vs ", absl::StrJoin(against, " and vs "),
        why.empty() ? std::string("; dimensions are aligned, check the kernel choice / layout")
                    : absl::StrCat("; likely cause: ", absl::StrJoin(why, "; ")));
    sink.Report(std::move(d));
  }
}

}  // namespace xpu::engine
