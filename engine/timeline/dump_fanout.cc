#include "engine/timeline/dump_fanout.h"

#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/wire/signature.h"

namespace xpu::engine::timeline {
namespace {

struct DaemonRequest {
  std::string daemon_id;
  std::set<int32_t> ranks;  // ranks the engine last saw on this daemon
  CommandFuture future;
  bool done = false;
};

// A ProcessBatch built from what the engine itself kept of a process: its
// identity, signatures and the newest records of its ring (packed like the
// wire). Caller holds the job lock.
bool EngineRingBatch(const ProcessState& p, const xpu::v1::TimelineDumpRequest& req,
                     xpu::v1::ProcessBatch* pb) {
  std::vector<xpu_record_v1> recs =
      p.ring.Last(req.last_n() > 0 ? req.last_n() : p.ring.capacity());
  std::string packed;
  packed.reserve(recs.size() * sizeof(xpu_record_v1));
  for (xpu_record_v1 r : recs) {
    if (r.start_ns < req.since_ns()) continue;
    r.commit = 0;
    packed.append(reinterpret_cast<const char*>(&r), sizeof(r));
  }
  if (packed.empty()) return false;
  *pb->mutable_identity() = p.identity;
  pb->set_exited(p.liveness == Liveness::kExited);
  // Signature ids are dense from 1 in practice; stop once all are found.
  size_t found = 0;
  for (uint32_t id = 1; found < p.sigs.size() && id < kMaxSigId; ++id) {
    const SignatureInfo* s = p.sigs.Find(id);
    if (s == nullptr) continue;
    ++found;
    wire::SignatureToWire(id, s->abi, s->name, pb->add_signatures());
  }
  pb->set_records(std::move(packed));
  return true;
}

uint64_t ElapsedMs(std::chrono::steady_clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

// One dump while it runs: what was asked, the daemons asked, and what the
// client has been sent so far.
struct Dump {
  Dump(const xpu::v1::TimelineDumpRequest& r, const DumpWriter& w)
      : request(r), write(w), wanted(r.ranks().begin(), r.ranks().end()) {}

  bool WriteProgress() {
    xpu::v1::TimelineDumpMessage m;
    *m.mutable_progress() = progress;
    m.mutable_progress()->set_elapsed_ms(ElapsedMs(t0));
    return write(m);
  }
  bool WriteRank(xpu::v1::ProcessBatch pb) {
    xpu::v1::TimelineDumpMessage m;
    *m.mutable_rank() = std::move(pb);
    return write(m);
  }
  void Missing(int32_t rank, const std::string& daemon_id, const std::string& reason) {
    xpu::v1::TimelineMissingRank* m = done.add_missing();
    m->set_rank(rank);
    if (!daemon_id.empty()) m->set_daemon_id(daemon_id);
    m->set_reason(reason);
  }

  const xpu::v1::TimelineDumpRequest& request;
  const DumpWriter& write;
  const std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  const std::set<int32_t> wanted;  // empty: every rank
  std::set<int32_t> known;         // ranks of the dump the engine knows
  std::map<std::string, std::unique_ptr<DaemonRequest>> daemons;
  std::chrono::milliseconds deadline_ms{0};
  xpu::v1::TimelineDumpProgress progress;
  xpu::v1::TimelineDumpDone done;
  std::set<int32_t> answered;
};

// Rank -> daemon, from what the engine last saw. Rank-less processes are
// included only when no rank filter was given (the daemon returns every
// process of the job then). Wanted ranks the engine does not know are
// missing from the start.
void AssignDaemons(JobState& job, Dump& dump) {
  {
    std::lock_guard<std::mutex> l(job.mu());
    for (const auto& [key, p] : job.processes()) {
      const int32_t rank = p->identity.rank();
      if (!dump.wanted.empty() && (rank < 0 || dump.wanted.count(rank) == 0)) continue;
      auto& d = dump.daemons[p->daemon_id];
      if (!d) {
        d = std::make_unique<DaemonRequest>();
        d->daemon_id = p->daemon_id;
      }
      if (rank >= 0) {
        d->ranks.insert(rank);
        dump.known.insert(rank);
      }
    }
  }
  for (int32_t r : dump.wanted) {
    if (dump.known.count(r) == 0) dump.Missing(r, "", "rank not known to the engine for this job");
  }
}

// Sends every command first, so that the daemons work in parallel.
void SendHistoryCommands(const CommandSender& send, const xpu::v1::CommandCaller& caller,
                         Dump& dump) {
  for (auto& [id, d] : dump.daemons) {
    xpu::v1::Command cmd;
    cmd.set_kind("history");
    cmd.set_job(dump.request.job());
    if (!dump.wanted.empty()) {
      for (int32_t r : d->ranks) cmd.add_ranks(r);
    }
    cmd.set_last_n(dump.request.last_n());
    cmd.set_since_ns(dump.request.since_ns());
    // The daemon-side deadline is a little longer than ours, so that a late
    // reply is still consumed (and dropped) by the pending-command table.
    cmd.set_deadline_ms(static_cast<uint64_t>(dump.deadline_ms.count()) + 5000);
    *cmd.mutable_caller() = caller;
    d->future = send(id, std::move(cmd));
  }
}

// Streams the ranks of one daemon's reply to the client; the daemon's ranks
// that the reply lacks are missing, with the reason.
absl::Status TakeReply(const std::string& id, DaemonRequest& d, Dump& dump) {
  absl::StatusOr<xpu::v1::CommandReply> reply = d.future.get();
  std::string failure;
  if (!reply.ok()) {
    failure = std::string(reply.status().message());
  } else if (!reply->ok()) {
    failure = absl::StrCat("daemon error: ", reply->error());
  }
  std::set<int32_t> got;
  if (failure.empty()) {
    if (reply->payload() == "truncated") dump.done.add_truncated_daemons(id);
    for (xpu::v1::ProcessBatch& pb : *reply->mutable_processes()) {
      const int32_t rank = pb.identity().rank();
      if (!dump.wanted.empty() && dump.wanted.count(rank) == 0) continue;
      if (rank >= 0) got.insert(rank);
      if (!dump.WriteRank(std::move(pb))) return absl::CancelledError("client went away");
    }
  }
  for (int32_t r : d.ranks) {
    if (got.count(r)) {
      dump.answered.insert(r);
      continue;
    }
    dump.Missing(
        r, id, !failure.empty() ? failure : "daemon answered without this rank (history expired?)");
  }
  for (int32_t r : got) dump.answered.insert(r);
  dump.progress.set_daemons_answered(dump.progress.daemons_answered() + 1);
  dump.progress.set_ranks_answered(static_cast<uint32_t>(dump.answered.size()));
  if (!dump.WriteProgress()) return absl::CancelledError("client went away");
  return absl::OkStatus();
}

// Takes the replies as they come until all are in or the deadline passed;
// the ranks of daemons that did not answer in time are missing.
absl::Status AwaitReplies(Dump& dump) {
  const auto deadline = dump.t0 + dump.deadline_ms;
  size_t pending = dump.daemons.size();
  while (pending > 0) {
    bool any = false;
    for (auto& [id, d] : dump.daemons) {
      if (d->done) continue;
      if (d->future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) continue;
      d->done = true;
      --pending;
      any = true;
      if (absl::Status st = TakeReply(id, *d, dump); !st.ok()) return st;
    }
    if (pending == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& [id, d] : dump.daemons) {
    if (d->done) continue;
    for (int32_t r : d->ranks) {
      dump.Missing(r, id, absl::StrCat("no answer within ", dump.deadline_ms.count(), " ms"));
    }
  }
  return absl::OkStatus();
}

// Ranks whose daemon did not answer: what the engine kept itself. Those it
// has records of move from `missing` to `from_engine`.
absl::Status SendEngineFallback(JobState& job, Dump& dump) {
  xpu::v1::TimelineDumpDone rest;
  std::vector<xpu::v1::ProcessBatch> batches;
  {
    std::lock_guard<std::mutex> l(job.mu());
    for (const xpu::v1::TimelineMissingRank& m : dump.done.missing()) {
      const ProcessState* found = nullptr;
      for (const auto& [key, p] : job.processes()) {
        if (p->identity.rank() == m.rank()) found = p.get();
      }
      xpu::v1::ProcessBatch pb;
      if (m.daemon_id().empty() || found == nullptr ||
          !EngineRingBatch(*found, dump.request, &pb)) {
        *rest.add_missing() = m;
        continue;
      }
      *dump.done.add_from_engine() = m;
      batches.push_back(std::move(pb));
    }
  }
  for (xpu::v1::ProcessBatch& pb : batches) {
    dump.answered.insert(pb.identity().rank());
    if (!dump.WriteRank(std::move(pb))) return absl::CancelledError("client went away");
  }
  dump.done.mutable_missing()->Swap(rest.mutable_missing());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTimelineDump(Registry& registry, const CommandSender& send,
                             const xpu::v1::TimelineDumpRequest& request, const DumpWriter& write,
                             const xpu::v1::CommandCaller& caller) {
  Dump dump(request, write);
  std::shared_ptr<JobState> job = registry.FindJob(request.job());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job '", request.job(), "'"));
  AssignDaemons(*job, dump);
  dump.deadline_ms = request.deadline_ms() > 0 ? std::chrono::milliseconds(request.deadline_ms())
                                               : kDefaultDumpDeadline;
  SendHistoryCommands(send, caller, dump);
  dump.progress.set_ranks_total(static_cast<uint32_t>(dump.known.size()));
  dump.progress.set_daemons_total(static_cast<uint32_t>(dump.daemons.size()));
  if (!dump.WriteProgress()) return absl::CancelledError("client went away");
  if (absl::Status st = AwaitReplies(dump); !st.ok()) return st;
  if (!request.no_engine_fallback() && dump.done.missing_size() > 0) {
    if (absl::Status st = SendEngineFallback(*job, dump); !st.ok()) return st;
  }
  dump.done.set_ranks_total(static_cast<uint32_t>(dump.known.size()));
  dump.done.set_ranks_answered(static_cast<uint32_t>(dump.answered.size()));
  dump.done.set_elapsed_ms(ElapsedMs(dump.t0));
  xpu::v1::TimelineDumpMessage m;
  *m.mutable_done() = std::move(dump.done);
  if (!write(m)) return absl::CancelledError("client went away");
  return absl::OkStatus();
}

}  // namespace xpu::engine::timeline
