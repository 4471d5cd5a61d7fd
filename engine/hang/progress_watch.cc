// engine/hang/progress_watch.cc — see progress_watch.h.
#include "engine/hang/progress_watch.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/analysis/steps.h"
#include "common/analysis/trace.h"
#include "engine/hang/stacks.h"

namespace xpu::engine::hang {
namespace {

std::string Secs(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.2f s", static_cast<double>(ns) * 1e-9);
  return buf;
}

}  // namespace

void ProgressWatch::RecentGaps::Add(uint64_t ns) {
  us_[next_] = static_cast<uint32_t>(std::min<uint64_t>(ns / 1000, UINT32_MAX));
  next_ = (next_ + 1) % us_.size();
  n_ = std::min<uint32_t>(n_ + 1, us_.size());
  std::array<uint32_t, 64> s = us_;
  const auto at = s.begin() + (n_ - 1) * 9 / 10;
  std::nth_element(s.begin(), at, s.begin() + n_);
  p90_us_ = *at;
}

uint64_t ProgressWatch::StepPeriodNs(const ProcessState& p, std::string* source) {
  analysis::RankTrace t;
  t.rank = p.identity.rank();
  for (const xpu_record_v1& r : p.ring.Last(kPaceTailRecords)) {
    const SignatureInfo* s = p.sigs.Find(r.sig_id);
    if (s == nullptr) continue;
    const uint16_t kind = s->abi.kind;
    if (kind != XPU_OP_STEP && !xpu_op_is_collective(kind)) continue;
    if (!t.sigs.count(r.sig_id)) t.sigs[r.sig_id] = analysis::OpSigFromAbi(s->abi, s->name);
    t.ops.push_back(analysis::OpFromRecord(r, kind));
  }
  t.Sort();
  const analysis::Steps steps = analysis::FindSteps(t);
  std::vector<double> d = steps.DurationsS();
  if (d.empty()) return 0;
  std::nth_element(d.begin(), d.begin() + static_cast<long>(d.size() / 2), d.end());
  *source = steps.source == analysis::StepSource::kMarkers ? "step markers" : "collective period";
  return static_cast<uint64_t>(d[d.size() / 2] * 1e9);
}

void ProgressWatch::RefreshPeriod(const JobState& job, uint64_t now_ns, JobPace* pace) const {
  // Every period_refresh_ns once known; while unknown (start-up), 5 times
  // as often.
  const uint64_t every =
      pace->step_period_ns != 0 ? options_.period_refresh_ns : options_.period_refresh_ns / 5;
  if (pace->refreshed_ns != 0 && now_ns - pace->refreshed_ns < every) return;
  pace->refreshed_ns = now_ns;
  // The lowest rank that has records speaks for the job (ranks of one job
  // share its step); its ring keeps kPaceTailRecords between windows.
  const ProcessState* rep = job.PaceProcess();
  if (rep == nullptr) return;
  std::string source;
  const uint64_t period = StepPeriodNs(*rep, &source);
  if (period > 0) {
    pace->step_period_ns = period;
    pace->step_source = source;
  }
}

std::optional<ProgressStall> ProgressWatch::Check(const JobState& job, uint64_t now_ns) {
  if (!enabled()) return std::nullopt;
  JobPace& pace = jobs_[job.job()];
  RefreshPeriod(job, now_ns, &pace);
  // Gaps between progress arrivals, per process; the job's gap figure is
  // the largest of the processes' 90th percentiles.
  uint64_t gap90 = 0, job_gap90 = 0;
  bool any_exited = false, any_live = false;
  // Both maps are in key order: one walk finds each process's pace.
  auto hint = pace.procs.begin();
  for (const auto& [key, p] : job.processes()) {
    while (hint != pace.procs.end() && hint->first < key) ++hint;
    if (hint == pace.procs.end() || hint->first != key) hint = pace.procs.emplace_hint(hint, key, ProcessPace{});
    ProcessPace& pp = (hint++)->second;
    bool startup_ends = false;
    if (!pp.stepped && p->first_step_rx_ns != 0) {
      // The first step marker: the gaps of the start-up (imports,
      // communicator set-up, compilation: seconds between progress
      // records) are no samples of the job's pace. A process without step
      // markers keeps them all.
      pp.stepped = startup_ends = true;
      pp.gaps.Clear();
      pp.job_gaps.Clear();
    }
    if (p->last_progress_rx_ns != pp.last_progress_ns) {
      if (pp.in_stall || startup_ends) {
        pp.in_stall = false;  // the gap that ends a stall (or the start-up) is no sample
      } else {
        if (pp.last_progress_ns != 0 && p->last_progress_rx_ns > pp.last_progress_ns) {
          pp.gaps.Add(p->last_progress_rx_ns - pp.last_progress_ns);
        }
        if (p->progress_gap_unread_ns != 0) {
          pp.job_gaps.Add(p->progress_gap_unread_ns);
        }
      }
      p->progress_gap_unread_ns = 0;
      pp.last_progress_ns = p->last_progress_rx_ns;
    }
    gap90 = std::max(gap90, pp.gaps.P90Ns());
    job_gap90 = std::max(job_gap90, pp.job_gaps.P90Ns());
    if (p->liveness == Liveness::kExited) {
      any_exited = true;
    } else {
      any_live = true;
    }
  }
  uint64_t period = pace.step_period_ns;
  std::string source = pace.step_source;
  if (job_gap90 > period) {
    period = job_gap90;
    source = "progress gaps";
  }
  const uint64_t threshold =
      std::max(options_.floor_ns, static_cast<uint64_t>(options_.multiple * period)) + gap90;
  pace.threshold_ns = threshold;
  if (!any_live) return std::nullopt;  // finished
  const uint64_t allowed = threshold + (any_exited ? options_.end_grace_ns : 0);
  ProgressStall s;
  s.threshold_ns = threshold;
  s.period_ns = period;
  s.period_source = period > 0 ? source : "none";
  // Silence is judged as far as the engine has seen each process
  // (ProcessState::SeenUntilNs): batches waiting in an ingest backlog are no
  // silence of the job (a 100k-rank job's ingest once fell tens of seconds
  // behind, and every rank was suspected). Nor are the spans the engine's
  // window tick held the job, when no record was applied.
  for (const auto& [key, p] : job.processes()) {
    if (p->liveness == Liveness::kExited || p->last_progress_rx_ns == 0) continue;
    const uint64_t last = p->last_progress_rx_ns;
    const uint64_t until = p->SeenUntilNs(now_ns);
    if (until <= last) continue;
    const uint64_t held = job.TickHeldWithin(last, until);
    if (until - last <= held) continue;
    const uint64_t silent = until - last - held;
    if (silent <= allowed) continue;
    s.ranks.push_back(p->identity.rank());
    if (s.since_ns == 0 || p->last_progress_rx_ns < s.since_ns) s.since_ns = p->last_progress_rx_ns;
  }
  if (s.ranks.empty()) return std::nullopt;
  s.trigger = "rank(s) " + CompressRanks(s.ranks) + " made no progress for " +
              Secs(now_ns - s.since_ns) + " (threshold " + Secs(threshold) + " = max(floor " +
              Secs(options_.floor_ns) + ", " + std::to_string(static_cast<int>(options_.multiple)) +
              " x the job's period " + Secs(period) + " from " + s.period_source + ") + " +
              Secs(gap90) + " between its progress's arrivals)";
  return s;
}

void ProgressWatch::MarkStalled(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (auto& [key, pp] : it->second.procs) pp.in_stall = true;
}

uint64_t ProgressWatch::ThresholdNs(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() || it->second.threshold_ns == 0 ? options_.floor_ns
                                                           : it->second.threshold_ns;
}

void ProgressWatch::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = keep.count(it->first) ? std::next(it) : jobs_.erase(it);
  }
}

}  // namespace xpu::engine::hang
