#include "common/analysis/steps.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/analysis/stats.h"

namespace xpu::analysis {

const char* StepSourceName(StepSource s) {
  switch (s) {
    case StepSource::kMarkers:
      return "step markers";
    case StepSource::kCollectivePeriod:
      return "collective-sequence period";
    case StepSource::kNone:
      break;
  }
  return "none";
}

std::vector<double> Steps::DurationsS() const {
  std::vector<double> out;
  for (size_t i = 0; i + 1 < boundaries_ns.size(); ++i) {
    out.push_back(static_cast<double>(boundaries_ns[i + 1] - boundaries_ns[i]) * 1e-9);
  }
  return out;
}

size_t SequencePeriod(const std::vector<uint64_t>& symbols, double min_match, size_t min_periods) {
  const size_t n = symbols.size();
  for (size_t p = 1; p * min_periods <= n; ++p) {
    size_t same = 0;
    for (size_t i = 0; i + p < n; ++i) same += symbols[i] == symbols[i + p];
    if (static_cast<double>(same) >= min_match * static_cast<double>(n - p)) {
      // A period-1 "pattern" is only meaningful if there is one symbol;
      // periods that are multiples of a smaller true period never get here.
      return p;
    }
  }
  return 0;
}

namespace {

// The rank's collectives (with a signature) in the order the host issued
// them: by launch time where the record has one (a valid issue latency),
// else by start. Start order is not issue order: a gradient all-reduce whose
// stream waits for its backward kernel can start after collectives issued
// later, and one such reordering every few steps breaks the period of the
// sequence (on the GPU-less runtime, a 6-collective step then read as a
// period of 48 to 96, and a healthy job as 5x slower).
std::vector<const Op*> CollectivesInIssueOrder(const RankTrace& t) {
  std::vector<const Op*> colls;
  for (const Op& op : t.ops) {
    if (xpu_op_is_collective(op.kind) && t.Sig(op.sig_id) != nullptr) colls.push_back(&op);
  }
  std::stable_sort(colls.begin(), colls.end(),
                   [](const Op* a, const Op* b) { return a->launch_ns() < b->launch_ns(); });
  return colls;
}

}  // namespace

Steps FindSteps(const RankTrace& t) {
  Steps s;
  std::set<uint32_t> seen_ids;
  for (const Op& op : t.ops) {
    if (op.kind != XPU_OP_STEP) continue;
    if (op.flags & XPU_REC_END) continue;  // an END of a BEGIN/END pair is not a new step
    if (!seen_ids.insert(op.seq).second) continue;
    s.boundaries_ns.push_back(op.start_ns);
  }
  if (s.boundaries_ns.size() >= 2) {
    std::sort(s.boundaries_ns.begin(), s.boundaries_ns.end());
    s.source = StepSource::kMarkers;
    return s;
  }
  s.boundaries_ns.clear();
  // Collective sequence: symbol = (comm_id, kind, bytes) of each collective,
  // in issue order.
  std::vector<const Op*> colls = CollectivesInIssueOrder(t);
  std::vector<uint64_t> symbols;
  std::map<std::tuple<uint64_t, uint16_t, uint64_t>, uint64_t> ids;
  for (const Op* op : colls) {
    const OpSig* sig = t.Sig(op->sig_id);
    auto key = std::make_tuple(sig->comm_id, sig->kind, sig->bytes);
    symbols.push_back(ids.emplace(key, ids.size()).first->second);
  }
  size_t p = SequencePeriod(symbols);
  if (p == 0) return s;
  // Phase: first occurrence of the rarest symbol within the first period.
  std::map<uint64_t, size_t> freq;
  for (size_t i = 0; i < p; ++i) ++freq[symbols[i]];
  size_t phase = 0;
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < p; ++i) {
    if (freq[symbols[i]] < best) {
      best = freq[symbols[i]];
      phase = i;
    }
  }
  for (size_t i = phase; i < colls.size(); i += p) s.boundaries_ns.push_back(colls[i]->start_ns);
  // Issue order is not start order: a boundary collective that started late
  // must not make a step of negative length.
  std::sort(s.boundaries_ns.begin(), s.boundaries_ns.end());
  if (s.boundaries_ns.size() >= 2) {
    s.source = StepSource::kCollectivePeriod;
    s.period = p;
  } else {
    s.boundaries_ns.clear();
  }
  return s;
}

ThroughputChange DetectThroughputChange(const std::vector<double>& step_s, size_t n,
                                        double threshold, double noise_z) {
  ThroughputChange r;
  if (n == 0 || step_s.size() < 2 * n) return r;
  r.enough_data = true;
  double sum = 0;
  std::vector<double> means;
  for (size_t i = 0; i < step_s.size(); ++i) {
    sum += step_s[i];
    if (i >= n) sum -= step_s[i - n];
    if (i + 1 >= n) means.push_back(sum / static_cast<double>(n));
  }
  r.recent_mean_s = means.back();
  // The recent best, robustly: the 10th percentile of the N-step means (the
  // minimum over thousands of overlapping windows of noisy steps is an
  // outlier that any later mean exceeds).
  r.best_mean_s = Quantile(means, 0.1);
  r.change = r.best_mean_s > 0 ? r.recent_mean_s / r.best_mean_s - 1 : 0;
  // Noise of an N-step mean, from consecutive-step differences (blind to a
  // change of level): sigma_step = 1.4826 MAD(diff) / sqrt(2).
  std::vector<double> diffs;
  for (size_t i = 1; i < step_s.size(); ++i) diffs.push_back(step_s[i] - step_s[i - 1]);
  const double sigma_step = 1.4826 * Mad(diffs) / std::sqrt(2.0);
  r.noise_s = sigma_step / std::sqrt(static_cast<double>(n));
  // A job whose level wanders (a launch-bound loop on a shared host) has
  // N-step means that spread wider than independent steps would: the spread
  // of the disjoint N-step means before the recent N (interquartile range /
  // 1.349, robust to a regression that covers under a quarter of them, and
  // to a level that flips between two values, where the MAD is 0) is the
  // noise then.
  std::vector<double> blocks;
  for (size_t end = step_s.size() - n; end >= n; end -= n) {
    double b = 0;
    for (size_t i = end - n; i < end; ++i) b += step_s[i];
    blocks.push_back(b / static_cast<double>(n));
  }
  if (blocks.size() >= 5) {
    r.noise_s = std::max(r.noise_s, (Quantile(blocks, 0.75) - Quantile(blocks, 0.25)) / 1.349);
  }
  r.degraded = r.change > threshold &&
               (noise_z <= 0 || r.recent_mean_s - r.best_mean_s > noise_z * r.noise_s);
  return r;
}

}  // namespace xpu::analysis
