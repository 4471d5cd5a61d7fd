// engine/hang/hang_monitor.cc — see hang_monitor.h.
#include "engine/hang/hang_monitor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"

namespace xpu::engine::hang {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("hang");
  return log;
}

// No batch about a process for this long: its daemon stopped reporting it.
constexpr uint64_t kUnreportedNs = 10ull * 1000000000ull;

uint64_t EnvU64(const char* name, uint64_t def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  unsigned long long x = strtoull(v, &end, 10);
  return end != v && *end == '\0' ? x : def;
}

double EnvDouble(const char* name, double def) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  const double x = strtod(v, &end);
  return end != v && *end == '\0' && x >= 0 ? x : def;
}

std::string VerdictLine(const Verdict& v) {
  return absl::StrCat(HangClassName(v.cls), ", culprits ", CompressRanks(v.culprits), ", team ",
                      v.team.empty() ? "none" : v.team, ": ", v.reason);
}

}  // namespace

HangMonitorOptions HangMonitorOptionsFromEnv() {
  HangMonitorOptions o;
  o.evidence_deadline_ms = EnvU64("XPU_HANG_EVIDENCE_DEADLINE_MS", o.evidence_deadline_ms);
  o.quick_deadline_ms = EnvU64("XPU_HANG_QUICK_DEADLINE_MS", o.quick_deadline_ms);
  o.poll_ms = std::max<uint64_t>(50, EnvU64("XPU_HANG_POLL_MS", o.poll_ms));
  o.enabled = EnvU64("XPU_HANG_DISABLE", 0) == 0;
  o.progress.floor_ns = static_cast<uint64_t>(
      EnvDouble("XPU_HANG_PROGRESS_FLOOR_S", static_cast<double>(o.progress.floor_ns) * 1e-9) *
      1e9);
  o.progress.multiple = EnvDouble("XPU_HANG_PROGRESS_MULTIPLE", o.progress.multiple);
  return o;
}

HangMonitor::HangMonitor(Registry& registry, EvidenceSender send, HangMonitorOptions options)
    : registry_(registry), send_(std::move(send)), options_(options), progress_(options.progress) {}

HangMonitor::~HangMonitor() { Stop(); }

void HangMonitor::Start() {
  if (!options_.enabled) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      l.unlock();
      Poll();
      l.lock();
      cv_.wait_for(l, PollWait(options_.poll_ms, pass_ns_.load()), [this] { return stop_; });
    }
  });
}

void HangMonitor::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  WaitIdle();
}

void HangMonitor::WaitIdle() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> l(mu_);
    workers.swap(workers_);
  }
  for (Worker& w : workers) {
    if (w.thread.joinable()) w.thread.join();
  }
}

void HangMonitor::SetListener(std::function<void(const Diagnosis&)> listener) {
  std::lock_guard<std::mutex> l(mu_);
  listener_ = std::move(listener);
}

std::optional<Diagnosis> HangMonitor::ActiveDiagnosis(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = active_.find(job);
  if (it == active_.end()) return std::nullopt;
  return it->second;
}

std::optional<HangReport> HangMonitor::Latest(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = latest_.find(job);
  if (it == latest_.end()) return std::nullopt;
  return it->second;
}

std::optional<HangMonitor::Suspicion> HangMonitor::Suspect(JobState& job, uint64_t now,
                                                           uint64_t* held_ns) {
  std::lock_guard<std::mutex> l(job.mu());
  const auto held_from = std::chrono::steady_clock::now();
  std::optional<Suspicion> s;
  auto consider = [&s](Suspicion c) {
    if (!s || (c.stall_since_ns != 0 && c.stall_since_ns < s->stall_since_ns)) s = std::move(c);
  };
  bool gone = false;
  std::string gone_ranks;
  uint64_t oldest_pending = 0;
  // Every process, twice a second: only the figures ApplyCounters kept in
  // its state are read here (the message of each is read for the rare
  // suspect).
  for (const auto& [key, p] : job.processes()) {
    // A hung rank writes no records and turns "silent" while its daemon still
    // reports it: only an exited rank, or one nobody reports any more (its
    // daemon is gone too), counts as gone.
    const bool unreported = now > p->last_seen_ns && now - p->last_seen_ns > kUnreportedNs;
    if (p->liveness == Liveness::kExited || (p->liveness == Liveness::kSilent && unreported)) {
      gone = true;
      gone_ranks += absl::StrCat(gone_ranks.empty() ? "" : ",", p->identity.rank(), "(",
                                 p->liveness == Liveness::kExited ? "exited" : "not reported", ")");
      continue;
    }
    if (p->hang_suspect) {
      const xpu::v1::HangProgress& pr = p->counters.progress();
      consider(Suspicion{
          absl::StrCat("rank ", p->identity.rank(), ": ",
                       pr.suspect_name().empty() ? "op" : pr.suspect_name(), " seq ",
                       pr.suspect_seq(), " outstanding beyond its threshold (",
                       pr.suspect_threshold_ns() / 1000000, " ms)"),
          p->hang_suspect_since_ns});
    }
    if (p->oldest_pending_ns != 0 &&
        (oldest_pending == 0 || p->oldest_pending_ns < oldest_pending)) {
      oldest_pending = p->oldest_pending_ns;
    }
  }
  if (gone && oldest_pending != 0 && now > oldest_pending &&
      now - oldest_pending > options_.exit_grace_ns) {
    consider(Suspicion{absl::StrCat("rank(s) ", gone_ranks,
                                    " stopped reporting while others wait in a collective"),
                       oldest_pending});
  }
  if (std::optional<ProgressStall> st = progress_.Check(job, now)) {
    consider(Suspicion{st->trigger, st->since_ns});
  }
  if (s) s->progress_records = job.progress_records();
  *held_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - held_from)
                                       .count());
  return s;
}

bool HangMonitor::MovedMeanwhile(const HangReport& r, uint64_t progress_records) const {
  if (r.verdict.cls == HangClass::kNone || r.verdict.cls == HangClass::kBusyWait) return false;
  std::shared_ptr<JobState> job = registry_.FindJob(r.job);
  if (job == nullptr) return false;
  uint64_t now_records = 0;
  {
    std::lock_guard<std::mutex> l(job->mu());
    now_records = job->progress_records();
  }
  if (now_records == progress_records) return false;
  Log()->info("job {}: {} record(s) of progress arrived while the {} verdict was formed ({}): "
              "the job moves; not reported",
              r.job, now_records - progress_records, r.phase, VerdictLine(r.verdict));
  return true;
}

void HangMonitor::Poll() {
  const uint64_t now = registry_.Now();
  std::vector<std::string> live;
  uint64_t pass_ns = 0;
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    live.push_back(job->job());
    uint64_t held_ns = 0;
    std::optional<Suspicion> s = Suspect(*job, now, &held_ns);
    pass_ns += held_ns;
    if (s) progress_.MarkStalled(job->job());
    bool continuing = false;
    const uint64_t threshold = progress_.ThresholdNs(job->job());
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!s) {
        episode_start_.erase(job->job());  // recovered: a later hang is a new episode
        busy_refined_.erase(job->job());
        active_.erase(job->job());
        continue;
      }
      auto it = episode_start_.find(job->job());
      if (it != episode_start_.end() && now - it->second < options_.rediagnose_ns) continue;
      if (stop_) return;
      continuing = it != episode_start_.end();  // no recovery since the last look
      episode_start_[job->job()] = now;
    }
    Log()->warn("job {}: suspected hang: {}", job->job(), s->trigger);
    EvidenceByProcess evidence;
    HangReport r =
        Diagnose(job->job(), options_.quick_deadline_ms, false, "quick", nullptr, &evidence,
                 auth::EngineCaller());
    r.trigger = s->trigger;
    r.stall_since_ns = s->stall_since_ns;
    r.suspected_ns = now;
    r.threshold_ns = threshold;
    r.phase = "quick";
    Log()->warn("job {}: first verdict {:.1f} s after the last progress: {}", r.job,
                r.stall_since_ns && r.diagnosed_ns > r.stall_since_ns
                    ? (r.diagnosed_ns - r.stall_since_ns) * 1e-9
                    : 0.0,
                VerdictLine(r.verdict));
    const bool moved = MovedMeanwhile(r, s->progress_records);
    // A re-check that finds what the episode's full pass already reported
    // keeps that (refined) report in place instead of a quick one.
    if (!moved && (!continuing || !RepeatsRefined(r))) Publish(r, now);
    if (r.verdict.cls == HangClass::kBusyWait || r.verdict.evidence_behind || moved) {
      // Not a fault yet (the ranks outside the collective are still busy),
      // no culprit yet (the engine is behind on the ranks that would be
      // named), or the job moved while the verdict was formed: a second
      // look after a second instead of after rediagnose_ns, so that a rank
      // that has stopped, or one whose batches were read, becomes a
      // verdict, and a job that runs on ends the episode; the full pass
      // runs once.
      constexpr uint64_t kRecheckNs = 1000000000ull;
      std::lock_guard<std::mutex> l(mu_);
      episode_start_[job->job()] =
          now + kRecheckNs > options_.rediagnose_ns ? now + kRecheckNs - options_.rediagnose_ns : 0;
      if (moved || !busy_refined_.insert(job->job()).second) continue;
    }
    // The full pass (native stacks, cuda-gdb ring reads) refines it, off
    // the poll thread.
    auto finished = std::make_shared<std::atomic<bool>>(false);
    std::lock_guard<std::mutex> l(mu_);
    for (auto w = workers_.begin(); w != workers_.end();) {
      if (w->finished->load()) {
        w->thread.join();
        w = workers_.erase(w);
      } else {
        ++w;
      }
    }
    workers_.push_back(Worker{std::thread([this, job = job->job(), r, ev = std::move(evidence), now,
                                           progress = s->progress_records, finished]() mutable {
                                Refine(std::move(job), std::move(r), std::move(ev), now, progress);
                                finished->store(true);
                              }),
                              finished});
  }
  // Said when the wait stretches beyond poll_ms, and when it no longer does.
  const uint64_t before = pass_ns_.exchange(pass_ns);
  const auto poll = std::chrono::milliseconds(options_.poll_ms);
  const auto wait = PollWait(options_.poll_ms, pass_ns);
  if ((wait > poll) != (PollWait(options_.poll_ms, before) > poll)) {
    Log()->info("hang watch: the suspicion passes over {} job(s) took {:.1f} ms; next poll in "
                "{:.0f} ms",
                live.size(), static_cast<double>(pass_ns) * 1e-6,
                static_cast<double>(wait.count()) * 1e-6);
  }
  progress_.Retain(live);
}

void HangMonitor::Refine(std::string job, HangReport quick, EvidenceByProcess evidence,
                         uint64_t episode, uint64_t progress_records) {
  HangReport r =
      Diagnose(job, options_.evidence_deadline_ms, false, "", &evidence, nullptr, auth::EngineCaller());
  r.trigger = quick.trigger;
  r.stall_since_ns = quick.stall_since_ns;
  r.suspected_ns = quick.suspected_ns;
  r.threshold_ns = quick.threshold_ns;
  r.refined_ns = r.diagnosed_ns;
  r.diagnosed_ns = quick.diagnosed_ns;
  r.evidence_ms += quick.evidence_ms;
  r.phase = "full";
  if (r.verdict.cls == HangClass::kNone && quick.verdict.cls != HangClass::kNone) {
    // The full pass saw nothing (e.g. the job recovered meanwhile): the
    // first verdict stands.
    r.verdict = quick.verdict;
  } else if (r.verdict.cls != quick.verdict.cls || r.verdict.culprits != quick.verdict.culprits) {
    r.first_verdict = VerdictLine(quick.verdict);
  }
  Log()->warn("job {}: refined verdict {:.1f} s after the last progress: {}", r.job,
              r.stall_since_ns && r.refined_ns > r.stall_since_ns
                  ? (r.refined_ns - r.stall_since_ns) * 1e-9
                  : 0.0,
              VerdictLine(r.verdict));
  if (MovedMeanwhile(r, progress_records)) return;
  Publish(r, episode);
}

bool HangMonitor::RepeatsRefined(const HangReport& quick) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = latest_.find(quick.job);
  return it != latest_.end() && it->second.refined_ns != 0 &&
         it->second.verdict.cls == quick.verdict.cls &&
         it->second.verdict.culprits == quick.verdict.culprits;
}

void HangMonitor::Publish(const HangReport& r, uint64_t episode) {
  std::function<void(const Diagnosis&)> listener;
  Diagnosis d;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto ep = episode_start_.find(r.job);
    const bool current = ep != episode_start_.end() && ep->second == episode;
    auto latest = latest_.find(r.job);
    // A refinement of an older episode does not replace a newer report; one
    // whose verdict a later quick re-check only repeated (a busy-wait
    // looked at again every second) does.
    if (latest != latest_.end() && latest->second.suspected_ns > r.suspected_ns) {
      const HangReport& l = latest->second;
      const bool repeated = r.refined_ns != 0 && l.refined_ns == 0 &&
                            l.verdict.cls == r.verdict.cls && l.verdict.culprits == r.verdict.culprits;
      if (!repeated) return;
    }
    latest_[r.job] = r;
    if (!current || r.verdict.cls == HangClass::kNone) return;
    d = ToDiagnosis(r);
    auto it = active_.find(r.job);
    const bool changed = it == active_.end() || it->second.kind != d.kind ||
                         it->second.ranks != d.ranks || it->second.evidence != d.evidence;
    active_[r.job] = d;
    if (changed) listener = listener_;
  }
  if (listener) listener(d);
}

absl::StatusOr<HangReport> HangMonitor::CollectNow(const std::string& job, uint64_t deadline_ms,
                                                   const xpu::v1::CommandCaller& caller) {
  if (registry_.FindJob(job) == nullptr)
    return absl::NotFoundError(absl::StrCat("no live job ", job));
  const uint64_t deadline = deadline_ms > 0 ? deadline_ms : options_.evidence_deadline_ms;
  EvidenceByProcess quick;
  HangReport q = Diagnose(job, std::min(deadline, options_.quick_deadline_ms), true, "quick",
                          nullptr, &quick, caller);
  HangReport r = Diagnose(job, deadline, true, "", &quick, nullptr, caller);
  r.evidence_ms += q.evidence_ms;
  r.phase = "on-demand";
  return r;
}

HangReport HangMonitor::Diagnose(const std::string& job_name, uint64_t deadline_ms,
                                 bool on_demand, const std::string& mode,
                                 const EvidenceByProcess* earlier,
                                 EvidenceByProcess* evidence_out,
                                 const xpu::v1::CommandCaller& caller) {
  HangReport report;
  report.job = job_name;
  report.on_demand = on_demand;
  std::shared_ptr<JobState> job = registry_.FindJob(job_name);
  const JobSnapshot snap = SnapshotJob(job.get(), registry_.Now());
  EvidenceByProcess evidence =
      GatherEvidence(send_, job_name, snap.procs, deadline_ms, mode, caller, &report);
  if (earlier != nullptr) MergeEarlierEvidence(*earlier, &evidence);
  const uint64_t now = registry_.Now();
  std::vector<RankEvidence> ranks =
      AssembleRanks(snap, evidence, now, options_.progress_fresh_ns, &report);
  ClassifyContext context;
  context.completed = snap.completed;
  context.now_ns = now;
  report.verdict = Classify(ranks, context);
  report.diagnosed_ns = registry_.Now();
  if (evidence_out != nullptr) *evidence_out = std::move(evidence);
  return report;
}

Diagnosis HangMonitor::ToDiagnosis(const HangReport& r) {
  Diagnosis d;
  d.job = r.job;
  std::string cls = HangClassName(r.verdict.cls);
  std::replace(cls.begin(), cls.end(), '-', '_');
  d.kind = "hang_" + cls;
  if (r.verdict.team == "infrastructure") {
    d.team = Team::kInfrastructure;
  } else if (r.verdict.team == "algorithm") {
    d.team = Team::kAlgorithm;
  } else {
    d.team = Team::kOperations;
  }
  d.severity = r.verdict.cls == HangClass::kBusyWait || r.verdict.cls == HangClass::kNone
                   ? Severity::kInfo
                   : Severity::kCritical;
  d.ranks = r.verdict.culprits;
  d.hosts = r.verdict.hosts;
  d.evidence = r.verdict.reason;
  for (const std::string& line : r.verdict.details) d.evidence += "\n" + line;
  d.first_seen_ns = r.suspected_ns;
  d.last_seen_ns = r.refined_ns != 0 ? r.refined_ns : r.diagnosed_ns;
  d.subject = cls + ":" + CompressRanks(r.verdict.culprits);
  return d;
}

}  // namespace xpu::engine::hang
