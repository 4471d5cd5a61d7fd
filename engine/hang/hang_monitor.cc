// engine/hang/hang_monitor.cc — see hang_monitor.h.
#include "engine/hang/hang_monitor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/hang/cuda_gdb_rings.h"
#include "spdlog/spdlog.h"
#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = [] {
    auto l = spdlog::get("hang");
    return l ? l : spdlog::default_logger()->clone("hang");
  }();
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

// What the engine itself knows about one process, copied under the job lock.
struct ProcessSnapshot {
  std::string key;
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string daemon_id;
  Liveness liveness = Liveness::kAlive;
  bool has_progress = false;
  xpu::v1::HangProgress progress;
  std::vector<OpenInterval> open;
};

// The host intervals the process opened and has not closed (kept by
// JobState::ApplyRecords as records arrive, however old they are).
std::vector<OpenInterval> OpenIntervals(const ProcessState& p) {
  std::vector<OpenInterval> out;
  for (const auto& [sig_id, start] : p.open_host) {
    const SignatureInfo* s = p.sigs.Find(sig_id);
    if (s == nullptr) continue;
    out.push_back(OpenInterval{s->abi.kind, s->name, start});
  }
  return out;
}

std::vector<CommState> Comms(const xpu::v1::HangProgress& p) {
  std::vector<CommState> out;
  for (const auto& c : p.comms()) {
    CommState s;
    s.comm_id = c.comm_id();
    s.last_issued = c.last_issued_seq();
    s.last_completed = c.last_completed_seq();
    s.pending_seq = c.pending_seq();
    s.pending_kind = c.pending_kind();
    s.pending_bytes = c.pending_bytes();
    s.pending_since_ns = c.pending_since_ns();
    s.pending_name = c.pending_name();
    s.comm_rank = c.comm_rank();
    s.comm_nranks = c.comm_nranks();
    out.push_back(std::move(s));
  }
  return out;
}

std::string Hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string WhereOf(const RankEvidence& r) {
  const ThreadStack* t = MainThread(!r.python.empty() ? r.python : r.native);
  return t != nullptr ? Innermost(*t, 4) : "";
}

}  // namespace

HangMonitorOptions HangMonitorOptionsFromEnv() {
  HangMonitorOptions o;
  o.evidence_deadline_ms = EnvU64("XPU_HANG_EVIDENCE_DEADLINE_MS", o.evidence_deadline_ms);
  o.poll_ms = std::max<uint64_t>(50, EnvU64("XPU_HANG_POLL_MS", o.poll_ms));
  o.enabled = EnvU64("XPU_HANG_DISABLE", 0) == 0;
  return o;
}

HangMonitor::HangMonitor(Registry& registry, EvidenceSender send, HangMonitorOptions options)
    : registry_(registry), send_(std::move(send)), options_(options) {}

HangMonitor::~HangMonitor() { Stop(); }

void HangMonitor::Start() {
  if (!options_.enabled) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      l.unlock();
      Poll();
      l.lock();
      cv_.wait_for(l, std::chrono::milliseconds(options_.poll_ms), [this] { return stop_; });
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

std::optional<HangMonitor::Suspicion> HangMonitor::Suspect(JobState& job, uint64_t now) {
  std::lock_guard<std::mutex> l(job.mu());
  std::optional<Suspicion> s;
  bool gone = false;
  std::string gone_ranks;
  uint64_t oldest_pending = 0;
  for (const auto& [key, p] : job.processes()) {
    const int32_t rank = p->identity.rank();
    // A hung rank writes no records and turns "silent" while its daemon still
    // reports it: only an exited rank, or one nobody reports any more (its
    // daemon is gone too), counts as gone.
    const bool unreported = now > p->last_seen_ns && now - p->last_seen_ns > kUnreportedNs;
    if (p->liveness == Liveness::kExited || (p->liveness == Liveness::kSilent && unreported)) {
      gone = true;
      gone_ranks += absl::StrCat(gone_ranks.empty() ? "" : ",", rank, "(",
                                 p->liveness == Liveness::kExited ? "exited" : "not reported", ")");
      continue;
    }
    if (!p->counters.has_progress()) continue;
    const xpu::v1::HangProgress& pr = p->counters.progress();
    if (pr.suspect()) {
      if (!s || pr.suspect_since_ns() < s->stall_since_ns) {
        s = Suspicion{
            absl::StrCat("rank ", rank, ": ", pr.suspect_name().empty() ? "op" : pr.suspect_name(),
                         " seq ", pr.suspect_seq(), " outstanding beyond its threshold (",
                         pr.suspect_threshold_ns() / 1000000, " ms)"),
            pr.suspect_since_ns()};
      }
    }
    for (const auto& c : pr.comms()) {
      if (c.pending_seq() != 0 && c.pending_since_ns() != 0 &&
          (oldest_pending == 0 || c.pending_since_ns() < oldest_pending)) {
        oldest_pending = c.pending_since_ns();
      }
    }
  }
  if (s) return s;
  if (gone && oldest_pending != 0 && now > oldest_pending &&
      now - oldest_pending > options_.exit_grace_ns) {
    return Suspicion{absl::StrCat("rank(s) ", gone_ranks,
                                  " stopped reporting while others wait in a collective"),
                     oldest_pending};
  }
  return std::nullopt;
}

void HangMonitor::Poll() {
  const uint64_t now = registry_.Now();
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    std::optional<Suspicion> s = Suspect(*job, now);
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!s) {
        episode_start_.erase(job->job());  // recovered: a later hang is a new episode
        active_.erase(job->job());
        continue;
      }
      auto it = episode_start_.find(job->job());
      if (it != episode_start_.end() && now - it->second < options_.rediagnose_ns) continue;
      episode_start_[job->job()] = now;
    }
    Log()->warn("job {}: suspected hang: {}", job->job(), s->trigger);
    HangReport r = Diagnose(job->job(), options_.evidence_deadline_ms, false, auth::EngineCaller());
    r.trigger = s->trigger;
    r.stall_since_ns = s->stall_since_ns;
    r.suspected_ns = now;
    Diagnosis d = ToDiagnosis(r);
    Log()->warn("job {}: {} hang, culprits {} ({}), {:.1f} s after the last progress", r.job,
                HangClassName(r.verdict.cls), CompressRanks(r.verdict.culprits), r.verdict.reason,
                r.stall_since_ns && r.diagnosed_ns > r.stall_since_ns
                    ? (r.diagnosed_ns - r.stall_since_ns) * 1e-9
                    : 0.0);
    std::function<void(const Diagnosis&)> listener;
    {
      std::lock_guard<std::mutex> l(mu_);
      latest_[r.job] = r;
      active_[r.job] = d;
      listener = listener_;
    }
    if (listener) listener(d);
  }
}

absl::StatusOr<HangReport> HangMonitor::CollectNow(const std::string& job, uint64_t deadline_ms,
                                                   const xpu::v1::CommandCaller& caller) {
  if (registry_.FindJob(job) == nullptr)
    return absl::NotFoundError(absl::StrCat("no live job ", job));
  return Diagnose(job, deadline_ms > 0 ? deadline_ms : options_.evidence_deadline_ms, true,
                  caller);
}

namespace {

// What the engine itself knows about each process of `job` (null: none),
// copied under the job's lock.
std::vector<ProcessSnapshot> SnapshotProcesses(JobState* job) {
  std::vector<ProcessSnapshot> procs;
  if (job == nullptr) return procs;
  std::lock_guard<std::mutex> l(job->mu());
  for (const auto& [key, p] : job->processes()) {
    ProcessSnapshot s;
    s.key = key;
    s.rank = p->identity.rank();
    s.host = p->identity.host();
    s.pid = p->identity.pid();
    s.daemon_id = p->daemon_id;
    s.liveness = p->liveness;
    s.has_progress = p->counters.has_progress();
    if (s.has_progress) s.progress = p->counters.progress();
    s.open = OpenIntervals(*p);
    procs.push_back(std::move(s));
  }
  return procs;
}

// The daemons' evidence, by (host, pid) of the process.
using EvidenceByProcess = std::map<std::pair<std::string, int32_t>, xpu::v1::ProcessEvidence>;

// Sends the evidence command to every daemon of the job, one command per
// daemon, all in flight at once, and waits up to the deadline (+3 s) for the
// answers. A daemon that does not answer in time, fails or sends unreadable
// evidence is logged and left out; `report` counts the daemons asked and
// answered and the time it took.
EvidenceByProcess GatherEvidence(const EvidenceSender& send, const std::string& job_name,
                                 const std::vector<ProcessSnapshot>& procs, uint64_t deadline_ms,
                                 const xpu::v1::CommandCaller& caller, HangReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, CommandFuture> futures;
  for (const ProcessSnapshot& s : procs) {
    if (s.daemon_id.empty() || futures.count(s.daemon_id) || !send) continue;
    xpu::v1::Command c;
    c.set_kind("evidence");
    c.set_job(job_name);
    c.set_deadline_ms(deadline_ms);
    *c.mutable_caller() = caller;
    futures.emplace(s.daemon_id, send(s.daemon_id, std::move(c)));
  }
  report->daemons_asked = static_cast<uint32_t>(futures.size());
  const auto until = t0 + std::chrono::milliseconds(deadline_ms + 3000);
  EvidenceByProcess evidence;
  for (auto& [daemon, f] : futures) {
    if (f.wait_until(until) != std::future_status::ready) {
      Log()->warn("job {}: daemon {} did not answer the evidence command in time", job_name,
                  daemon);
      continue;
    }
    absl::StatusOr<xpu::v1::CommandReply> reply = f.get();
    if (!reply.ok() || !reply->ok()) {
      Log()->warn("job {}: evidence from {} failed: {}", job_name, daemon,
                  reply.ok() ? reply->error() : reply.status().ToString());
      continue;
    }
    xpu::v1::EvidenceReply ev;
    if (!ev.ParseFromString(reply->payload())) {
      Log()->warn("job {}: unreadable evidence from {}", job_name, daemon);
      continue;
    }
    ++report->daemons_answered;
    for (const auto& p : ev.processes()) evidence[{p.identity().host(), p.identity().pid()}] = p;
  }
  report->evidence_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return evidence;
}

// cuda-gdb channel readings per source ("cuda-gdb...") and comm rank; they
// are placed along the ring once every rank is in (PlaceCudaGdbRings).
using CudaGdbReadings = std::map<std::string, std::map<int32_t, std::vector<RingReading>>>;

// Fills `r` and the kernel part of its summary from what its daemon read:
// process state, stacks, GPU health and intra-kernel progress. cuda-gdb's
// readings, in communicator ranks, go to `cuda_gdb`. Returns the hook's
// progress table from the evidence, or `progress` when it has none.
const xpu::v1::HangProgress* ApplyEvidence(const xpu::v1::ProcessEvidence& e,
                                           const xpu::v1::HangProgress* progress, RankEvidence* r,
                                           RankSummary* sum, CudaGdbReadings* cuda_gdb) {
  r->answered = true;
  r->proc_state = e.proc_state();
  r->exited = r->exited || e.exited();
  r->native = ParseGdbBacktrace(e.native_stacks());
  r->python = ParsePythonStacks(e.python_stacks());
  r->native_error = e.native_error();
  r->python_error = e.python_error();
  r->gpu_health = e.gpu_health();
  if (e.has_progress()) progress = &e.progress();
  for (const auto& k : e.kernel()) {
    if (absl::StartsWith(k.source(), "cuda-gdb")) {
      sum->kernel += absl::StrCat(sum->kernel.empty() ? "" : "; ", k.source(), " ", k.channel(),
                                  " (#", k.arrived_seq(), "): ", k.detail());
      RingReading c;
      c.channel = atoi(k.channel().c_str() + (absl::StartsWith(k.channel(), "ch") ? 2 : 0));
      c.ring_prev = k.ring_prev();
      c.ring_next = k.ring_next();
      c.steps = k.step();
      c.sent = k.sent();
      if (k.ring_next() >= 0 && k.comm_rank() >= 0)
        (*cuda_gdb)[k.source()][k.comm_rank()].push_back(c);
      continue;
    }
    KernelProgress kp;
    kp.channel = k.source() + ":" + k.channel();
    kp.ring_pos = k.comm_rank();
    kp.ring_size = k.comm_nranks();
    kp.seq = k.arrived_seq();
    kp.completed_seq = k.completed_seq();
    kp.step = k.step();
    kp.steps_total = k.steps_total();
    kp.source = k.source();
    r->kernel.push_back(kp);
    sum->kernel +=
        absl::StrCat(sum->kernel.empty() ? "" : "; ", k.source(), " arrived ", k.arrived_seq(),
                     " completed ", k.completed_seq(), " step ", k.step(), "/", k.steps_total());
  }
  sum->collect_ms = e.collect_ms();
  return progress;
}

// The report's line for one rank, from its evidence.
void SummarizeRank(const RankEvidence& r, RankSummary* sum) {
  sum->rank = r.rank;
  sum->host = r.host;
  sum->pid = r.pid;
  sum->proc_state = r.proc_state;
  sum->answered = r.answered;
  sum->where = WhereOf(r);
  for (const CommState& c : r.comms) {
    sum->comms += absl::StrCat(sum->comms.empty() ? "" : "; ", "comm ", Hex(c.comm_id).substr(0, 8),
                               ": issued ", c.last_issued, " completed ", c.last_completed);
    if (c.pending_seq) {
      sum->comms += absl::StrCat(" pending #", c.pending_seq, " ", c.pending_name, " (",
                                 c.pending_bytes, " B)");
    }
  }
  for (const OpenInterval& o : r.open) {
    sum->open += absl::StrCat(sum->open.empty() ? "" : "; ", o.name, " (kind ", o.kind, ") since ",
                              o.since_ns);
  }
  sum->native_error = r.native_error;
  sum->python_error = r.python_error;
  sum->gpu_health = r.gpu_health;
}

// One process as the classifier sees it: the engine's snapshot, completed
// with its daemon's evidence when the daemon answered.
RankEvidence EvidenceOf(const ProcessSnapshot& s, const EvidenceByProcess& evidence,
                        RankSummary* sum, CudaGdbReadings* cuda_gdb) {
  RankEvidence r;
  r.rank = s.rank;
  r.host = s.host;
  r.pid = s.pid;
  r.exited = s.liveness == Liveness::kExited;
  r.open = s.open;
  auto it = evidence.find({s.host, s.pid});
  const xpu::v1::HangProgress* progress = s.has_progress ? &s.progress : nullptr;
  if (it != evidence.end()) {
    progress = ApplyEvidence(it->second, progress, &r, sum, cuda_gdb);
  } else {
    r.answered = false;
    r.proc_state = r.exited ? "gone" : "unknown";
  }
  if (progress != nullptr) {
    r.has_progress = true;
    r.comms = Comms(*progress);
  }
  SummarizeRank(r, sum);
  return r;
}

// Ring positions from the neighbours cuda-gdb read; progress along the ring
// then locates a stalled link like the test runtime's counters do.
// cuda-gdb speaks communicator ranks (the daemon reads the communicator with
// the oldest outstanding collective): map them to job ranks through the
// hook's per-communicator state, which every member has, also one that never
// entered the kernel.
void PlaceCudaGdbRings(const CudaGdbReadings& cuda_gdb, std::vector<RankEvidence>* ranks) {
  std::map<uint64_t, std::map<int32_t, size_t>> members;  // comm -> comm rank -> index in ranks
  uint64_t stuck = 0, oldest = 0;
  for (size_t i = 0; i < ranks->size(); ++i) {
    for (const CommState& c : (*ranks)[i].comms) {
      if (c.comm_rank >= 0) members[c.comm_id][c.comm_rank] = i;
      if (c.pending_seq != 0 && (stuck == 0 || c.pending_since_ns < oldest)) {
        stuck = c.comm_id;
        oldest = c.pending_since_ns;
      }
    }
  }
  const std::map<int32_t, size_t>& index_of = members[stuck];
  auto global = [&](int32_t comm_rank) {
    auto it = index_of.find(comm_rank);
    return it == index_of.end() ? -1 : (*ranks)[it->second].rank;
  };
  for (const auto& [source, by_comm_rank] : cuda_gdb) {
    std::map<int32_t, std::vector<KernelProgress>> placed;
    RingProgressFromCudaGdb(by_comm_rank, source, &placed);
    for (auto& [comm_rank, list] : placed) {
      auto it = index_of.find(comm_rank);
      if (it == index_of.end()) continue;
      for (KernelProgress& k : list) {
        k.prev_rank = global(k.prev_rank);
        (*ranks)[it->second].kernel.push_back(std::move(k));
      }
    }
  }
}

}  // namespace

HangReport HangMonitor::Diagnose(const std::string& job_name, uint64_t deadline_ms,
                                 bool on_demand, const xpu::v1::CommandCaller& caller) {
  HangReport report;
  report.job = job_name;
  report.on_demand = on_demand;
  std::shared_ptr<JobState> job = registry_.FindJob(job_name);
  const std::vector<ProcessSnapshot> procs = SnapshotProcesses(job.get());
  const EvidenceByProcess evidence = GatherEvidence(send_, job_name, procs, deadline_ms, caller, &report);
  std::vector<RankEvidence> ranks;
  CudaGdbReadings cuda_gdb;
  for (const ProcessSnapshot& s : procs) {
    RankSummary sum;
    RankEvidence r = EvidenceOf(s, evidence, &sum, &cuda_gdb);
    report.ranks.push_back(sum);
    report.tree.AddRank(r.rank);
    report.tree.Add(r.rank, r.native);
    report.tree.Add(r.rank, r.python);
    ranks.push_back(std::move(r));
  }
  if (!cuda_gdb.empty()) PlaceCudaGdbRings(cuda_gdb, &ranks);
  std::sort(report.ranks.begin(), report.ranks.end(),
            [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  report.verdict = Classify(ranks);
  report.diagnosed_ns = registry_.Now();
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
  d.last_seen_ns = r.diagnosed_ns;
  d.subject = cls + ":" + CompressRanks(r.verdict.culprits);
  return d;
}

}  // namespace xpu::engine::hang
