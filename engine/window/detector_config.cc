#include "engine/window/detector_config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace xpu::engine {

const std::vector<DetectorParam>& DetectorDefaults() {
  static const auto* d = new std::vector<DetectorParam>{
      {"figures.histogram_max_ranks", 256,
       "jobs of up to this many ranks get a Prometheus issue-latency histogram per rank; larger "
       "ones one per family pooled over their ranks (rank=\"all\")"},
      {"figures.gauge_max_ranks", 256,
       "jobs of up to this many ranks get every per-rank Prometheus gauge; larger ones only those "
       "of the ranks that stand out (figures.standout_ranks) and each figure's spread"},
      {"figures.standout_ranks", 8,
       "in a larger job, the ranks furthest below and above the median of each figure that keep "
       "their gauges (this many on each side)"},
      {"throughput.steps", 10, "N: steps in the recent mean and in each candidate best mean"},
      {"throughput.threshold", 0.05, "degraded when recent mean > best mean x (1 + threshold)"},
      {"throughput.noise_z", 3,
       "and recent mean - best mean > this many standard errors of an N-step mean (0: off)"},
      {"throughput.persist_windows", 2,
       "consecutive windows the job must be degraded against its own best (previous runs: at "
       "once)"},
      {"slow_gpu.min_drop", 0.15, "a rank's TFLOPS must be this fraction below the peer median"},
      {"slow_gpu.mad_k", 5, "and beyond median - k x MAD across ranks"},
      {"slow_gpu.min_count", 3, "timed, non-overlapping GEMMs of a shape per rank per window"},
      {"slow_gpu.min_ranks", 3, "ranks that ran a shape for it to be compared"},
      {"slow_gpu.intermittent_factor", 3,
       "a call this many times slower than the rank's typical call of its shape is slowed "
       "(time-sliced GPU)"},
      {"slow_gpu.intermittent_share", 0.2,
       "share of a rank's timed GEMM time lost in such calls that names the rank"},
      {"slow_gpu.intermittent_min_queue_us", 1000,
       "only calls issued behind at least this much queued work are judged (a host delay "
       "stretches calls launched onto an empty queue)"},
      {"unoptimized_gemm.ratio", 0.6,
       "shape slow when its best rank is below ratio x reference TFLOPS"},
      {"unoptimized_gemm.min_gflop", 1, "only shapes with at least this many GFLOP per call"},
      {"unoptimized_gemm.min_ideal_us", 50,
       "only shapes that would take at least this long at the reference TFLOPS (shorter ones are "
       "latency-bound)"},
      {"unoptimized_gemm.peak_tflops", 0,
       "known peak TFLOPS of the accelerator (0: reference = best shape of the job)"},
      {"slow_link.min_drop", 0.3,
       "link / communicator busbw this fraction below its peers or history"},
      {"slow_link.min_bytes", 1 << 20,
       "collectives smaller than this are latency-bound: their busbw is not compared"},
      {"slow_link.persist_windows", 2,
       "consecutive windows a slow link / ring must last before it is reported"},
      {"slow_link.mad_k", 3, "and beyond median - k x MAD of the links"},
      {"slow_link.expected_busbw_gbps", 0, "offline-profiled busbw in GB/s (0: not used)"},
      {"slow_link.calibrated_min_drop", 0.5,
       "communicator busbw this fraction below the calibrated busbw (xpu calibrate runs "
       "collectives alone)"},
      {"issue_stall.min_samples", 20, "issue-latency samples per rank and family per window"},
      {"issue_stall.ks", 0.5, "Kolmogorov-Smirnov distance to peers / history"},
      {"issue_stall.shift_ratio", 0.5,
       "and median issue latency below ratio x the reference median"},
      {"issue_stall.floor_us", 20, "issue latencies below this are 'no queue' (steep CDF)"},
      {"issue_stall.steep_fraction", 0.6, "fraction under floor_us that makes a CDF steep"},
      {"issue_stall.step_fraction", 0.1,
       "or: median issue latency below this fraction of the step time (queue never fills)"},
      {"issue_stall.sync_cost_share", 0.02,
       "synchronizations are costly when the GPU idles after they return (the host refills an "
       "empty queue) for this share of the step time"},
      {"issue_stall.sync_peer_cost_share", 0.001,
       "a rank that synchronizes more than its peers (sync_growth) is named when its syncs cost "
       "this share of the step more than theirs"},
      {"issue_stall.sync_growth", 1.5,
       "and, once a rank's first windows gave its own rate, this many times that rate; or this "
       "many times the other ranks' rate (and one more per step)"},
      {"issue_stall.min_gc_share", 0.02, "GC time share of the step time to blame GC"},
      {"issue_stall.gc_alone_share", 0.10,
       "GC time share of the step that names GC with no reference (no peers, no clean first "
       "windows, no history): a job that collects from its first step"},
      {"issue_stall.wait_share", 0.10,
       "a rank whose collectives take this share of the step more than the least-waiting rank's "
       "waits for a "
       "slower peer: its issue latencies are not judged"},
      {"issue_stall.persist_windows", 2,
       "consecutive windows a rank's stall (same cause) must last before it is reported (start-up "
       "is noisy)"},
      {"dataloader.min_share", 0.10, "DataLoader time / step time to consider a rank"},
      {"dataloader.abs_share", 0.25, "share flagged even without peers to compare"},
      {"dataloader.mad_k", 5, "share beyond median + k x MAD across ranks"},
      {"void_inter.threshold", 0.25,
       "V_inter above this (no history yet; a training script that synchronizes and logs every "
       "step sits near 15 %)"},
      {"void_inter.history_delta", 0.05, "or this much above the job's baseline V_inter"},
      {"void_inter.persist_windows", 2,
       "consecutive windows a rank must be over (a run's first window, with its start-up steps, "
       "sits above history)"},
      {"void_minority.threshold", 0,
       "V_minority above this (0: no absolute threshold; set it per backbone, e.g. "
       "void_minority.threshold@llama=0.2: healthy FSDP runs 26 % of untraced kernels)"},
      {"void_minority.history_delta", 0.10, "or this much above the job's baseline V_minority"},
      {"void_minority.persist_windows", 2, "consecutive windows a rank must be over"},
      {"extra_work.min_share", 0.05,
       "GPU time per step of the calls a rank makes beyond its peers' (same collectives, same "
       "program), as a share of its step time, that names extra GPU work on the rank"},
      {"extra_work.persist_windows", 2, "consecutive windows a rank's extra work must last"},
      {"history.baseline_windows", 2, "windows with data that form a job's baseline"},
      {"history.runs", 5,
       "previous runs of a job name and GPU model kept and combined (median) as its history"},
      {"history.min_runs", 1,
       "previous runs needed before a detector compares a job with its history"},
  };
  return *d;
}

namespace {
bool Known(std::string_view key) {
  for (const DetectorParam& p : DetectorDefaults()) {
    if (key == p.key) return true;
  }
  return false;
}

// Keys of earlier releases that no longer exist: accepted and ignored with
// a warning (what replaced them), so that an old config file still loads.
struct RetiredKey {
  std::string_view key, replaced_by;
};
constexpr RetiredKey kRetired[] = {
    {"issue_stall.max_syncs_per_step",
     "synchronizations are judged by what they cost the step: issue_stall.sync_cost_share"},
};

const RetiredKey* Retired(std::string_view key) {
  for (const RetiredKey& r : kRetired) {
    if (key == r.key) return &r;
  }
  return nullptr;
}
}  // namespace

absl::StatusOr<DetectorConfig> DetectorConfig::Parse(std::string_view text) {
  DetectorConfig c;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("detector config line ", line_no, ": expected key = value"));
    }
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    std::string base = key.substr(0, key.find('@'));
    if (const RetiredKey* r = Retired(base)) {
      std::fprintf(stderr, "detector config line %d: '%s' is no longer used (%.*s); ignored\n",
                   line_no, base.c_str(), static_cast<int>(r->replaced_by.size()),
                   r->replaced_by.data());
      continue;
    }
    if (!Known(base)) {
      return absl::InvalidArgumentError(
          absl::StrCat("detector config line ", line_no, ": unknown key '", base, "'"));
    }
    double v;
    if (!absl::SimpleAtod(value, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("detector config line ", line_no, ": '", value, "' is not a number"));
    }
    c.overrides_[key] = v;
  }
  return c;
}

absl::StatusOr<DetectorConfig> DetectorConfig::Load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read detector config ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str());
}

double DetectorConfig::Get(std::string_view key, std::string_view backbone) const {
  if (!backbone.empty()) {
    auto it = overrides_.find(std::string(key) + "@" + std::string(backbone));
    if (it != overrides_.end()) return it->second;
  }
  auto it = overrides_.find(key);
  if (it != overrides_.end()) return it->second;
  for (const DetectorParam& p : DetectorDefaults()) {
    if (key == p.key) return p.value;
  }
  // A detector asked for a key that is not in the table: programmer error.
  std::fprintf(stderr, "unknown detector parameter %.*s\n", static_cast<int>(key.size()),
               key.data());
  std::abort();
}

}  // namespace xpu::engine
