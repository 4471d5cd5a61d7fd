#include "engine/detectors/unoptimized_gemm.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"
#include "common/logging/logging.h"

namespace xpu::engine {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("detectors");
  return log;
}

struct Shape {
  analysis::OpSig sig;
  std::vector<double> tflops;
  std::vector<int32_t> ranks;
};

// The window's GEMM shapes that can be judged (per rank: at least min_count
// timed calls that do not overlap communication, at least min_flops each),
// and what was left out, for the debug line.
struct WindowShapes {
  std::map<std::string, Shape> shapes;
  size_t seen = 0;           // distinct GEMM keys in the window
  size_t few_calls = 0;      // (rank, key) pairs below min_count
  size_t small = 0;          // (rank, key) pairs below min_flops per call
  uint64_t overlapped = 0;   // calls left out: overlapping communication
  uint64_t untimed = 0;      // calls left out: not GPU-timed
  std::vector<std::string> few_examples;  // the first few under min_count, with their counts
};

WindowShapes CollectShapes(const WindowView& v, uint64_t min_count, double min_flops,
                           bool examples) {
  WindowShapes w;
  std::set<std::string> seen;
  for (const analysis::RankTrace& t : v.ranks) {
    for (const auto& [key, g] : v.GemmsOf(t)) {
      seen.insert(key);
      w.overlapped += g.excluded_overlap;
      w.untimed += g.excluded_untimed;
      if (g.sig.flops < min_flops) {
        ++w.small;
        continue;
      }
      if (g.count < min_count) {
        if (++w.few_calls <= 3 && examples) {
          w.few_examples.push_back(absl::StrCat("'", key, "' on rank ", t.rank, ": ", g.count,
                                                " used, ", g.excluded_overlap, " overlapping, ",
                                                g.excluded_untimed, " untimed"));
        }
        continue;
      }
      Shape& s = w.shapes[key];
      s.sig = g.sig;
      s.tflops.push_back(g.Tflops());
      s.ranks.push_back(t.rank);
    }
  }
  w.seen = seen.size();
  return w;
}

// The shape of the window furthest below its reference and what became of
// it: the engine's debug line says why a slow shape was not reported.
struct Slowest {
  std::string key, why;
  double top = 0, reference = 0;
  void Note(const std::string& k, double t, double ref, std::string reason) {
    const double r = ref > 0 ? t / ref : 1e300;
    const double cur = reference > 0 ? top / reference : 1e300;
    if (!key.empty() && r >= cur) return;
    key = k;
    top = t;
    reference = ref;
    why = std::move(reason);
  }
};

void LogWindow(const JobState& job, const WindowShapes& w, uint64_t min_count, size_t reported,
               const Slowest& slowest) {
  if (!Log()->should_log(spdlog::level::debug)) return;
  Log()->debug(
      "job {}: unoptimized_gemm: {} of {} GEMM shapes judged ({} rank shapes under {} timed "
      "calls, {} under min_gflop; {} calls overlapping communication and {} untimed left "
      "out{}), {} reported; furthest below: {}",
      job.job(), w.shapes.size(), w.seen, w.few_calls, min_count, w.small, w.overlapped,
      w.untimed,
      w.few_examples.empty() ? std::string()
                             : absl::StrCat("; ", absl::StrJoin(w.few_examples, "; ")),
      reported,
      slowest.key.empty()
          ? std::string("none")
          : absl::StrCat("'", slowest.key, "' at ", Fmt(slowest.top, 1), " TFLOPS vs reference ",
                         Fmt(slowest.reference, 1), ": ", slowest.why));
}

}  // namespace

void UnoptimizedGemmDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  const double ratio = Param(v, "unoptimized_gemm.ratio");
  const double min_flops = Param(v, "unoptimized_gemm.min_gflop") * 1e9;
  const double min_ideal_us = Param(v, "unoptimized_gemm.min_ideal_us");
  const double peak = Param(v, "unoptimized_gemm.peak_tflops");
  const uint64_t min_count = static_cast<uint64_t>(Param(v, "slow_gpu.min_count"));

  const WindowShapes window =
      CollectShapes(v, min_count, min_flops, Log()->should_log(spdlog::level::debug));
  const std::map<std::string, Shape>& shapes = window.shapes;
  Slowest slowest;
  size_t reported = 0;
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
    if (s.ranks.size() < min_ranks) {
      slowest.Note(key, analysis::Median(s.tflops), best[s.sig.dtype],
                   absl::StrCat("run by ", s.ranks.size(), " of ", min_ranks, " ranks needed"));
      continue;
    }
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
    const double top = *std::max_element(s.tflops.begin(), s.tflops.end());
    if (reference > 0 && s.sig.flops / (reference * 1e12) * 1e6 < min_ideal_us) {
      slowest.Note(key, top, reference, "latency-bound (under min_ideal_us at the reference)");
      continue;
    }
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
    if (!below_reference && !below_history) {
      slowest.Note(key, top, reference, absl::StrCat("not below ", Fmt(ratio), "x (", source, ")"));
      continue;
    }
    // A shape that reached its reference earlier in this job has a good
    // kernel: what slowed it since is the device (slow_gpu), not the
    // kernel choice.
    const double earlier = shape_best[key];
    if ((!below_reference || earlier >= ratio * reference) &&
        (!below_history || earlier >= ratio * prev->value)) {
      slowest.Note(key, top, reference,
                   absl::StrCat("reached ", Fmt(earlier, 1), " TFLOPS earlier in the job"));
      continue;
    }
    // A kernel choice is a property of the shape: it is reported once two
    // consecutive windows agree, so that a window of start-up effects
    // (first calls, clocks ramping up) is not taken for one.
    if (held.Hold(key) < 2) {
      slowest.Note(key, top, reference, "low in its first window (two needed)");
      continue;
    }
    slowest.Note(key, top, reference, "reported");
    ++reported;
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
  LogWindow(job, window, min_count, reported, slowest);
}

}  // namespace xpu::engine
