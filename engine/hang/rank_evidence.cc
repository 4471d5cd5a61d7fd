// engine/hang/rank_evidence.cc — see rank_evidence.h.
#include "engine/hang/rank_evidence.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/hang/cuda_gdb_rings.h"
#include "common/logging/logging.h"
#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("hang");
  return log;
}

// Collectives looked back at for the per-step pattern (the collective
// table keeps 1024 per communicator).
constexpr uint32_t kPatternLookback = 1024;

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

OverdueOp Overdue(const xpu::v1::HangProgress& p) {
  OverdueOp o;
  if (!p.suspect()) return o;
  o.set = true;
  o.kind = p.suspect_kind();
  o.seq = p.suspect_seq();
  o.stream = p.suspect_stream();
  o.since_ns = p.suspect_since_ns();
  o.threshold_ns = p.suspect_threshold_ns();
  o.comm_id = p.suspect_comm_id();
  o.name = p.suspect_name();
  return o;
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

// The size the hook reports for an outstanding collective (count x element)
// from the collective table's bytes (formulas.h: the gathered size for the
// gather family).
uint64_t PerRankBytes(uint16_t kind, uint64_t bytes, int32_t nranks) {
  switch (kind) {
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER:
    case XPU_OP_SCATTER:
      return nranks > 1 ? bytes / static_cast<uint64_t>(nranks) : bytes;
    default:
      return bytes;
  }
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
  r->threads = e.threads();
  r->cpu_busy = e.threads().empty() && e.cpu_busy() == 0 ? -1 : e.cpu_busy();
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
  if (r.overdue.set) {
    sum->overdue = absl::StrCat(r.overdue.name.empty() ? "op" : r.overdue.name, " #", r.overdue.seq,
                                " on stream ", r.overdue.stream, " (kind ", r.overdue.kind,
                                ") launched at ", r.overdue.since_ns, ", over its threshold of ",
                                r.overdue.threshold_ns / 1000000, " ms");
  }
  sum->native_error = r.native_error;
  sum->python_error = r.python_error;
  sum->gpu_health = r.gpu_health;
  sum->threads = r.threads;
  sum->cpu_busy = r.cpu_busy;
  sum->progress_age_ms = r.progress_age_ns >= 0 ? r.progress_age_ns / 1000000 : -1;
}

// One process as the classifier sees it: the engine's snapshot, completed
// with its daemon's evidence when the daemon answered.
RankEvidence EvidenceOf(const ProcessSnapshot& s, const EvidenceByProcess& evidence,
                        uint64_t now_ns, uint64_t threshold_ns, RankSummary* sum,
                        CudaGdbReadings* cuda_gdb) {
  RankEvidence r;
  r.rank = s.rank;
  r.host = s.host;
  r.pid = s.pid;
  r.exited = s.liveness == Liveness::kExited;
  r.open = s.open;
  if (s.last_progress_rx_ns != 0 && now_ns >= s.last_progress_rx_ns) {
    const uint64_t age = now_ns - s.last_progress_rx_ns;
    const uint64_t seen_age = age - std::min(age, s.unseen_ns);
    r.progress_age_ns = static_cast<int64_t>(age);
    r.progressing = seen_age < threshold_ns;
  }
  auto it = evidence.find({s.host, s.pid});
  const xpu::v1::HangProgress* progress = s.has_progress ? &s.progress : nullptr;
  if (it != evidence.end()) {
    progress = ApplyEvidence(it->second, progress, &r, sum, cuda_gdb);
  } else {
    r.answered = false;
    r.table_behind = s.unseen_ns > 0;
    r.proc_state = r.exited ? "gone" : "unknown";
  }
  if (progress != nullptr) {
    r.has_progress = true;
    r.comms = Comms(*progress);
    r.overdue = Overdue(*progress);
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

JobSnapshot SnapshotJob(JobState* job, uint64_t now_ns) {
  JobSnapshot snap;
  if (job == nullptr) return snap;
  std::lock_guard<std::mutex> l(job->mu());
  std::map<uint64_t, uint32_t> stuck;  // comm -> smallest outstanding seq
  for (const auto& [key, p] : job->processes()) {
    ProcessSnapshot s;
    s.key = key;
    s.rank = p->identity.rank();
    s.host = p->identity.host();
    s.pid = p->identity.pid();
    s.daemon_id = p->daemon_id;
    s.liveness = p->liveness;
    s.has_progress = p->counters.has_progress();
    if (s.has_progress) {
      s.progress = p->counters.progress();
      for (const auto& c : s.progress.comms()) {
        if (c.pending_seq() == 0) continue;
        uint32_t& seq = stuck[c.comm_id()];
        seq = seq == 0 ? c.pending_seq() : std::min(seq, c.pending_seq());
      }
    }
    s.open = OpenIntervals(*p);
    s.last_progress_rx_ns = p->last_progress_rx_ns;
    s.unseen_ns = now_ns - std::min(now_ns, p->SeenUntilNs(now_ns));
    snap.procs.push_back(std::move(s));
  }
  // What the stuck communicators completed before: the job's per-step
  // pattern (consecutive seqs back from the stuck one, as far as known).
  for (const auto& [comm, seq] : stuck) {
    auto& hist = snap.completed[comm];
    for (uint32_t s = seq - 1, n = 0; s != 0 && n < kPatternLookback; --s, ++n) {
      CollectiveShape e;
      if (!job->collectives().Shape(comm, s, &e)) break;
      hist[s] = {e.kind, PerRankBytes(e.kind, e.bytes, e.nranks)};
    }
  }
  return snap;
}

EvidenceByProcess GatherEvidence(const CommandSender& send, const std::string& job_name,
                                 const std::vector<ProcessSnapshot>& procs, uint64_t deadline_ms,
                                 const std::string& mode, const xpu::v1::CommandCaller& caller,
                                 HangReport* report) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, CommandFuture> futures;
  for (const ProcessSnapshot& s : procs) {
    if (s.daemon_id.empty() || futures.count(s.daemon_id) || !send) continue;
    xpu::v1::Command c;
    c.set_kind("evidence");
    c.set_job(job_name);
    c.set_deadline_ms(deadline_ms);
    c.set_evidence_mode(mode);
    *c.mutable_caller() = caller;
    futures.emplace(s.daemon_id, send(s.daemon_id, std::move(c)));
  }
  report->daemons_asked = static_cast<uint32_t>(futures.size());
  report->daemons_answered = 0;
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
  report->evidence_ms += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return evidence;
}

void MergeEarlierEvidence(const EvidenceByProcess& earlier, EvidenceByProcess* later) {
  for (auto& [key, e] : *later) {
    auto it = earlier.find(key);
    if (it == earlier.end()) continue;
    const xpu::v1::ProcessEvidence& q = it->second;
    if (e.python_stacks().empty() && !q.python_stacks().empty()) {
      e.set_python_stacks(q.python_stacks());
      e.set_python_error(q.python_error());
    } else if (e.python_stacks().empty()) {
      e.set_python_error(q.python_error());
    }
    if (e.threads().empty()) e.set_threads(q.threads());
    if (e.cpu_busy() < 0 && q.cpu_busy() >= 0) e.set_cpu_busy(q.cpu_busy());
  }
}

std::vector<RankEvidence> AssembleRanks(const JobSnapshot& snap,
                                        const EvidenceByProcess& evidence, uint64_t now_ns,
                                        uint64_t threshold_ns, HangReport* report) {
  std::vector<RankEvidence> ranks;
  CudaGdbReadings cuda_gdb;
  report->ranks.clear();
  report->tree = StackTree();
  for (const ProcessSnapshot& s : snap.procs) {
    RankSummary sum;
    RankEvidence r = EvidenceOf(s, evidence, now_ns, threshold_ns, &sum, &cuda_gdb);
    report->ranks.push_back(sum);
    report->tree.AddRank(r.rank);
    report->tree.Add(r.rank, r.native);
    report->tree.Add(r.rank, r.python);
    ranks.push_back(std::move(r));
  }
  if (!cuda_gdb.empty()) PlaceCudaGdbRings(cuda_gdb, &ranks);
  std::sort(report->ranks.begin(), report->ranks.end(),
            [](const RankSummary& a, const RankSummary& b) { return a.rank < b.rank; });
  return ranks;
}

}  // namespace xpu::engine::hang
