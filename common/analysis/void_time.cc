#include "common/analysis/void_time.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace xpu::analysis {
namespace {

// GPU ops sorted by start with the running maximum of their ends, for
// "latest GPU activity before x" and "first GPU op at or after x".
struct GpuIndex {
  std::vector<uint64_t> starts;
  std::vector<uint64_t> max_end;  // max end of ops[0..i]
  explicit GpuIndex(const RankTrace& t) {
    starts.reserve(t.ops.size());
    max_end.reserve(t.ops.size());
    uint64_t m = 0;
    for (const Op& op : t.ops) {
      if (!IsGpuOp(op.kind)) continue;
      starts.push_back(op.start_ns);
      m = std::max(m, op.end_ns());
      max_end.push_back(m);
    }
  }
  // End of GPU activity among ops starting before x; 0 if none.
  uint64_t LastEndBefore(uint64_t x) const {
    size_t i = std::lower_bound(starts.begin(), starts.end(), x) - starts.begin();
    return i == 0 ? 0 : max_end[i - 1];
  }
  // Start of the first GPU op starting at or after x; UINT64_MAX if none.
  uint64_t FirstStartAtOrAfter(uint64_t x) const {
    auto it = std::lower_bound(starts.begin(), starts.end(), x);
    return it == starts.end() ? UINT64_MAX : *it;
  }
};

double Gap(uint64_t last_end, uint64_t first_start) {
  if (last_end == 0 || first_start == UINT64_MAX || first_start <= last_end) return 0;
  return static_cast<double>(first_start - last_end) * 1e-9;
}

// A union of [start, end) intervals: Add them, Merge once, then ask how
// much of a span they cover.
class Intervals {
 public:
  void Add(uint64_t a, uint64_t b) {
    if (b > a) v_.emplace_back(a, b);
  }
  void Merge() {
    std::sort(v_.begin(), v_.end());
    std::vector<std::pair<uint64_t, uint64_t>> m;
    for (const auto& iv : v_) {
      if (!m.empty() && iv.first <= m.back().second) {
        m.back().second = std::max(m.back().second, iv.second);
      } else {
        m.push_back(iv);
      }
    }
    v_ = std::move(m);
  }
  uint64_t Covered(uint64_t a, uint64_t b) const {
    uint64_t n = 0;
    auto it = std::lower_bound(v_.begin(), v_.end(), std::make_pair(a, uint64_t{0}));
    if (it != v_.begin()) --it;
    for (; it != v_.end() && it->first < b; ++it) {
      const uint64_t lo = std::max(a, it->first), hi = std::min(b, it->second);
      if (hi > lo) n += hi - lo;
    }
    return n;
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> v_;
};

// Steps longer than this are pauses; 0 when fewer than three steps start
// in [from_ns, to_ns).
double PauseThresholdS(const std::vector<uint64_t>& b, uint64_t from_ns, uint64_t to_ns) {
  std::vector<double> d;
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    if (b[i] >= from_ns && b[i] < to_ns) d.push_back(static_cast<double>(b[i + 1] - b[i]) * 1e-9);
  }
  if (d.size() < 3) return 0;
  std::nth_element(d.begin(), d.begin() + static_cast<long>(d.size() / 2), d.end());
  return kPauseFactor * d[d.size() / 2];
}

// The mean GPU time of each signature's ops in `streams` (timed ops).
std::unordered_map<uint32_t, uint64_t> MeanDurations(
    const std::map<uint16_t, std::vector<const Op*>>& streams) {
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> sum;  // sig -> (ns, n)
  for (const auto& [stream, ops] : streams) {
    for (const Op* op : ops) {
      auto& [ns, n] = sum[op->sig_id];
      ns += op->dur_ns;
      ++n;
    }
  }
  std::unordered_map<uint32_t, uint64_t> mean;
  for (const auto& [sig, s] : sum) mean[sig] = s.first / s.second;
  return mean;
}

// The GPU time, in a gap between two timed ops of a stream, of the untimed
// occurrences launched on it between them (they ran there, in order): for
// an op whose signature has GPU-timed occurrences in the trace, their mean
// duration (`typical`); for one without, all of the gap up to its observed
// completion (an upper bound), returned as a later start of the gap.
// `untimed` lists each stream's untimed ops in start (= CPU launch) order.
struct UntimedWork {
  uint64_t gap_start = 0;  // the gap starts no earlier
  uint64_t busy_ns = 0;    // estimated GPU time inside the gap
};
UntimedWork UntimedIn(const std::map<uint16_t, std::vector<const Op*>>& untimed,
                      const std::unordered_map<uint32_t, uint64_t>& typical, uint16_t stream,
                      const Op& prev, const Op& next) {
  UntimedWork w;
  auto u = untimed.find(stream);
  if (u == untimed.end()) return w;
  const std::vector<const Op*>& ops = u->second;
  auto it = std::upper_bound(ops.begin(), ops.end(), prev.launch_ns(),
                             [](uint64_t x, const Op* op) { return x < op->start_ns; });
  for (; it != ops.end() && (*it)->start_ns < next.launch_ns(); ++it) {
    auto d = typical.find((*it)->sig_id);
    if (d != typical.end()) {
      w.busy_ns += d->second;
    } else {
      w.gap_start = std::max(w.gap_start, std::min((*it)->end_ns(), next.start_ns));
    }
  }
  return w;
}

}  // namespace

SyncIdle ComputeSyncIdle(const RankTrace& t, const Steps& steps) {
  SyncIdle out;
  const auto& b = steps.boundaries_ns;
  if (b.size() < 2) return out;
  // GPU ops in start order: start, end, and when the host made them
  // available (launch, or start when the issue latency is unknown).
  std::vector<uint64_t> starts, ends, refill, loaders;
  for (const Op& op : t.ops) {
    if (op.kind == XPU_OP_PY_DATALOADER && !(op.flags & XPU_REC_BEGIN)) loaders.push_back(op.start_ns);
    if (!IsGpuOp(op.kind)) continue;
    starts.push_back(op.start_ns);
    ends.push_back(op.end_ns());
    refill.push_back(std::min(op.start_ns, op.launch_ns()));
  }
  std::vector<uint64_t> max_end(ends.size());
  uint64_t m = 0;
  for (size_t i = 0; i < ends.size(); ++i) max_end[i] = m = std::max(m, ends[i]);
  auto inside = [](const std::vector<uint64_t>& sorted, uint64_t from, uint64_t to) {
    auto it = std::lower_bound(sorted.begin(), sorted.end(), from);
    return it != sorted.end() && *it <= to;
  };
  struct Gap {
    uint64_t from, to;
    size_t step;
  };
  std::vector<Gap> gaps;
  uint64_t counted_to = 0;  // end of the last gap taken
  for (const Op& op : t.ops) {
    if (!IsSyncEvent(op.kind) || (op.flags & XPU_REC_BEGIN)) continue;
    const uint64_t r = op.end_ns();
    if (r < b.front() || r >= b.back()) continue;
    size_t i = static_cast<size_t>(std::lower_bound(starts.begin(), starts.end(), r) -
                                   starts.begin());
    uint64_t busy_to = i ? max_end[i - 1] : 0;  // the GPU's work started before r ends
    // Work that starts while the GPU is still busy extends the busy time.
    for (; i < starts.size() && starts[i] <= std::max(r, busy_to); ++i) {
      busy_to = std::max(busy_to, ends[i]);
    }
    if (i == starts.size()) continue;
    const uint64_t idle_from = std::max(r, busy_to);
    const uint64_t idle_to = std::max(idle_from, refill[i]);
    if (idle_to <= std::max(idle_from, counted_to)) continue;
    // A GPU-idle gap around a step boundary or a DataLoader call is
    // inter-step time.
    const uint64_t gpu_idle_from = busy_to ? std::min(busy_to, idle_from) : idle_from;
    if (inside(b, gpu_idle_from, idle_to) || inside(loaders, gpu_idle_from, idle_to)) continue;
    const size_t step = static_cast<size_t>(
        std::upper_bound(b.begin(), b.end(), idle_from) - b.begin() - 1);
    gaps.push_back({std::max(idle_from, counted_to), idle_to, step});
    counted_to = idle_to;
  }
  // Steps from the collective period have no marker where the loop ends a
  // step: without DataLoader events either, the longest gap after a sync in
  // each step is taken for the loop's own end-of-step sync and the host
  // work between steps (V_inter's), not a sync cost.
  std::vector<bool> dropped(gaps.size(), false);
  if (steps.source == StepSource::kCollectivePeriod && loaders.empty()) {
    std::map<size_t, size_t> longest;  // step -> gap index
    for (size_t g = 0; g < gaps.size(); ++g) {
      auto [it, fresh] = longest.emplace(gaps[g].step, g);
      const Gap& cur = gaps[it->second];
      if (!fresh && gaps[g].to - gaps[g].from > cur.to - cur.from) it->second = g;
    }
    for (const auto& [step, g] : longest) dropped[g] = true;
  }
  for (size_t g = 0; g < gaps.size(); ++g) {
    if (dropped[g]) continue;
    ++out.gaps;
    out.idle_s += static_cast<double>(gaps[g].to - gaps[g].from) * 1e-9;
  }
  return out;
}

VoidFigures ComputeVoid(const RankTrace& t, const Steps& steps, uint64_t from_ns, uint64_t to_ns) {
  VoidFigures v;
  const auto& b = steps.boundaries_ns;
  if (b.size() < 2) return v;
  GpuIndex gpu(t);
  std::vector<const Op*> loaders;
  for (const Op& op : t.ops) {
    if (op.kind == XPU_OP_PY_DATALOADER && !(op.flags & XPU_REC_BEGIN)) loaders.push_back(&op);
  }
  v.inter_from_dataloader = !loaders.empty();
  // Per stream, the GPU ops in start order, for minority gaps.
  // Counted first: each list is allocated once.
  std::map<uint16_t, std::vector<const Op*>> streams;
  size_t collectives = 0;
  {
    std::map<uint16_t, size_t> counts;
    for (const Op& op : t.ops) counts[op.stream] += IsGpuOp(op.kind) && op.timed();
    for (const auto& [stream, n] : counts) {
      if (n > 0) streams[stream].reserve(n);
    }
  }
  // Per stream, the traced GPU ops that were not GPU-timed (the sampler's
  // completion-tracked occurrences), by CPU launch: they ran between the
  // timed ops launched before and after them.
  std::map<uint16_t, std::vector<const Op*>> untimed;
  for (const Op& op : t.ops) {
    if (IsGpuOp(op.kind) && op.timed()) streams[op.stream].push_back(&op);
    if (IsGpuOp(op.kind) && !op.timed() && (op.flags & XPU_REC_NOT_TIMED))
      untimed[op.stream].push_back(&op);
    collectives += xpu_op_is_collective(op.kind);
  }
  // The mean GPU time of each signature's timed occurrences: what its
  // untimed ones are taken to have run (only a trace that has some).
  const std::unordered_map<uint32_t, uint64_t> typical =
      untimed.empty() ? std::unordered_map<uint32_t, uint64_t>() : MeanDurations(streams);
  // Ends of collectives on this rank, for cross-stream waits.
  std::vector<uint64_t> comm_ends;
  comm_ends.reserve(collectives);
  for (const Op& op : t.ops) {
    if (xpu_op_is_collective(op.kind)) comm_ends.push_back(op.end_ns());
  }
  std::sort(comm_ends.begin(), comm_ends.end());
  // Per stream, the union of the traced compute ops of the other streams:
  // while they run, a queued op's wait is traced work, not minority time.
  std::map<uint16_t, Intervals> others;
  for (const auto& [stream, ops] : streams) {
    Intervals& u = others[stream];
    for (const auto& [other, oops] : streams) {
      if (other == stream) continue;
      for (const Op* op : oops) {
        if (IsComputeKernel(op->kind)) u.Add(op->start_ns, op->end_ns());
      }
    }
    u.Merge();
  }
  const double pause_s = PauseThresholdS(b, from_ns, to_ns);
  auto is_pause = [&](size_t i) {
    return pause_s > 0 && static_cast<double>(b[i + 1] - b[i]) * 1e-9 > pause_s;
  };
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    const uint64_t s = b[i], e = b[i + 1];
    if (s < from_ns || s >= to_ns) continue;
    if (is_pause(i)) {
      ++v.pauses;
      v.pause_s += static_cast<double>(e - s) * 1e-9;
      continue;
    }
    // After a pause the GPU idle time before this step's start is the
    // pause's, not this step's inter-step gap.
    const uint64_t not_before = i > 0 && is_pause(i - 1) ? s : 0;
    auto last_end = [&](uint64_t x) { return std::max(gpu.LastEndBefore(x), not_before); };
    ++v.steps;
    v.step_s += static_cast<double>(e - s) * 1e-9;
    if (v.inter_from_dataloader) {
      for (const Op* dl : loaders) {
        if (dl->start_ns < s || dl->start_ns >= e) continue;
        v.dataloader_s += static_cast<double>(dl->dur_ns) * 1e-9;
        v.inter_s += Gap(last_end(dl->start_ns), gpu.FirstStartAtOrAfter(dl->end_ns()));
      }
    } else {
      v.inter_s += Gap(last_end(s), gpu.FirstStartAtOrAfter(s));
    }
    for (const auto& [stream, ops] : streams) {
      auto it = std::lower_bound(ops.begin(), ops.end(), s,
                                 [](const Op* op, uint64_t x) { return op->start_ns < x; });
      for (; it != ops.end() && (*it)->start_ns < e; ++it) {
        if (it == ops.begin()) continue;
        const Op* prev = *(it - 1);
        const Op* next = *it;
        if (!IsComputeKernel(prev->kind) || !IsComputeKernel(next->kind)) continue;
        if (!next->issue_valid() || next->start_ns <= prev->end_ns()) continue;
        if (next->launch_ns() > prev->end_ns()) continue;  // host was late: not minority work
        // A collective ending inside the gap may be what `next` waited for
        // (event wait across streams): only the part after it counts.
        uint64_t gap_start = prev->end_ns();
        auto ce = std::upper_bound(comm_ends.begin(), comm_ends.end(), next->start_ns);
        if (ce != comm_ends.begin() && *(ce - 1) > gap_start) gap_start = *(ce - 1);
        // Traced ops launched between the two ran in the gap (the sampler's
        // untimed occurrences): traced work, not minority.
        const UntimedWork w = UntimedIn(untimed, typical, stream, *prev, *next);
        gap_start = std::max(gap_start, w.gap_start);
        const uint64_t traced = others[stream].Covered(gap_start, next->start_ns);
        v.cross_s += static_cast<double>(traced) * 1e-9;
        const uint64_t gap = next->start_ns - gap_start - traced;
        v.minority_s += static_cast<double>(gap - std::min(gap, w.busy_ns)) * 1e-9;
      }
    }
  }
  return v;
}

HostTime HostEventTime(const RankTrace& t, uint16_t kind, uint64_t from_ns, uint64_t to_ns) {
  HostTime h;
  for (const Op& op : t.ops) {
    if (op.kind != kind || op.start_ns < from_ns || op.start_ns >= to_ns) continue;
    if (op.flags & XPU_REC_BEGIN) continue;  // the END record (or a complete one) carries the time
    ++h.count;
    h.seconds += static_cast<double>(op.dur_ns) * 1e-9;
  }
  return h;
}

HostTime SyncTime(const RankTrace& t, uint64_t from_ns, uint64_t to_ns) {
  HostTime h;
  // Ops are sorted by start: a sync inside the interval of an earlier one
  // is the same blocking call seen twice (torch.cuda.synchronize and the
  // cudaDeviceSynchronize it makes) and counts once; time is the union.
  uint64_t outer_end = 0;
  for (const Op& op : t.ops) {
    if (!IsSyncEvent(op.kind) || op.start_ns < from_ns || op.start_ns >= to_ns) continue;
    if (op.flags & XPU_REC_BEGIN) continue;
    if (op.start_ns < outer_end && op.end_ns() <= outer_end) continue;  // nested
    const uint64_t begin = std::max(op.start_ns, outer_end);
    ++h.count;  // overlapping only in part: another call (another thread)
    h.seconds += static_cast<double>(op.end_ns() - std::min(begin, op.end_ns())) * 1e-9;
    outer_end = std::max(outer_end, op.end_ns());
  }
  return h;
}

std::vector<double> IssueLatenciesUs(const RankTrace& t, KernelFamily f, uint64_t from_ns,
                                     uint64_t to_ns) {
  std::vector<double> out;
  for (const Op& op : t.ops) {
    if (op.start_ns < from_ns || op.start_ns >= to_ns || !op.issue_valid()) continue;
    bool match =
        f == KernelFamily::kCompute ? IsComputeKernel(op.kind) : xpu_op_is_collective(op.kind) != 0;
    if (match) out.push_back(static_cast<double>(op.issue_latency_ns) * 1e-3);
  }
  return out;
}

}  // namespace xpu::analysis
