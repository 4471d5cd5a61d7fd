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

}  // namespace

absl::Status RunTimelineDump(Registry& registry, const CommandSender& send,
                             const xpu::v1::TimelineDumpRequest& request, const DumpWriter& write) {
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<JobState> job = registry.FindJob(request.job());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("unknown job '", request.job(), "'"));
  const std::set<int32_t> wanted(request.ranks().begin(), request.ranks().end());

  // Rank -> daemon, from what the engine last saw. Rank-less processes are
  // included only when no rank filter was given (the daemon returns every
  // process of the job then).
  std::map<std::string, std::unique_ptr<DaemonRequest>> daemons;
  std::set<int32_t> known;
  {
    std::lock_guard<std::mutex> l(job->mu());
    for (const auto& [key, p] : job->processes()) {
      const int32_t rank = p->identity.rank();
      if (!wanted.empty() && (rank < 0 || wanted.count(rank) == 0)) continue;
      auto& d = daemons[p->daemon_id];
      if (!d) {
        d = std::make_unique<DaemonRequest>();
        d->daemon_id = p->daemon_id;
      }
      if (rank >= 0) {
        d->ranks.insert(rank);
        known.insert(rank);
      }
    }
  }

  xpu::v1::TimelineDumpDone done;
  for (int32_t r : wanted) {
    if (known.count(r) == 0) {
      xpu::v1::TimelineMissingRank* m = done.add_missing();
      m->set_rank(r);
      m->set_reason("rank not known to the engine for this job");
    }
  }
  const auto deadline_ms = request.deadline_ms() > 0
                               ? std::chrono::milliseconds(request.deadline_ms())
                               : kDefaultDumpDeadline;
  const auto deadline = t0 + deadline_ms;

  // Send every command first, so that the daemons work in parallel.
  for (auto& [id, d] : daemons) {
    xpu::v1::Command cmd;
    cmd.set_kind("history");
    cmd.set_job(request.job());
    if (!wanted.empty()) {
      for (int32_t r : d->ranks) cmd.add_ranks(r);
    }
    cmd.set_last_n(request.last_n());
    cmd.set_since_ns(request.since_ns());
    // The daemon-side deadline is a little longer than ours, so that a late
    // reply is still consumed (and dropped) by the pending-command table.
    cmd.set_deadline_ms(static_cast<uint64_t>(deadline_ms.count()) + 5000);
    d->future = send(id, std::move(cmd));
  }

  xpu::v1::TimelineDumpProgress progress;
  progress.set_ranks_total(static_cast<uint32_t>(known.size()));
  progress.set_daemons_total(static_cast<uint32_t>(daemons.size()));
  auto write_progress = [&]() {
    xpu::v1::TimelineDumpMessage m;
    *m.mutable_progress() = progress;
    m.mutable_progress()->set_elapsed_ms(ElapsedMs(t0));
    return write(m);
  };
  if (!write_progress()) return absl::CancelledError("client went away");

  std::set<int32_t> answered;
  size_t pending = daemons.size();
  while (pending > 0) {
    bool any = false;
    for (auto& [id, d] : daemons) {
      if (d->done) continue;
      if (d->future.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) continue;
      d->done = true;
      --pending;
      any = true;
      absl::StatusOr<xpu::v1::CommandReply> reply = d->future.get();
      std::string failure;
      if (!reply.ok()) {
        failure = std::string(reply.status().message());
      } else if (!reply->ok()) {
        failure = absl::StrCat("daemon error: ", reply->error());
      }
      std::set<int32_t> got;
      if (failure.empty()) {
        if (reply->payload() == "truncated") done.add_truncated_daemons(id);
        for (xpu::v1::ProcessBatch& pb : *reply->mutable_processes()) {
          const int32_t rank = pb.identity().rank();
          if (!wanted.empty() && wanted.count(rank) == 0) continue;
          if (rank >= 0) got.insert(rank);
          xpu::v1::TimelineDumpMessage m;
          *m.mutable_rank() = std::move(pb);
          if (!write(m)) return absl::CancelledError("client went away");
        }
      }
      for (int32_t r : d->ranks) {
        if (got.count(r)) {
          answered.insert(r);
          continue;
        }
        xpu::v1::TimelineMissingRank* m = done.add_missing();
        m->set_rank(r);
        m->set_daemon_id(id);
        m->set_reason(!failure.empty() ? failure
                                       : "daemon answered without this rank (history expired?)");
      }
      for (int32_t r : got) answered.insert(r);
      progress.set_daemons_answered(progress.daemons_answered() + 1);
      progress.set_ranks_answered(static_cast<uint32_t>(answered.size()));
      if (!write_progress()) return absl::CancelledError("client went away");
    }
    if (pending == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& [id, d] : daemons) {
    if (d->done) continue;
    for (int32_t r : d->ranks) {
      xpu::v1::TimelineMissingRank* m = done.add_missing();
      m->set_rank(r);
      m->set_daemon_id(id);
      m->set_reason(absl::StrCat("no answer within ", deadline_ms.count(), " ms"));
    }
  }
  // Ranks whose daemon did not answer: what the engine kept itself.
  if (!request.no_engine_fallback() && done.missing_size() > 0) {
    xpu::v1::TimelineDumpDone rest;
    std::vector<xpu::v1::ProcessBatch> batches;
    {
      std::lock_guard<std::mutex> l(job->mu());
      for (const xpu::v1::TimelineMissingRank& m : done.missing()) {
        const ProcessState* found = nullptr;
        for (const auto& [key, p] : job->processes()) {
          if (p->identity.rank() == m.rank()) found = p.get();
        }
        xpu::v1::ProcessBatch pb;
        if (m.daemon_id().empty() || found == nullptr || !EngineRingBatch(*found, request, &pb)) {
          *rest.add_missing() = m;
          continue;
        }
        *done.add_from_engine() = m;
        batches.push_back(std::move(pb));
      }
    }
    for (xpu::v1::ProcessBatch& pb : batches) {
      answered.insert(pb.identity().rank());
      xpu::v1::TimelineDumpMessage m;
      *m.mutable_rank() = std::move(pb);
      if (!write(m)) return absl::CancelledError("client went away");
    }
    done.mutable_missing()->Swap(rest.mutable_missing());
  }
  done.set_ranks_total(static_cast<uint32_t>(known.size()));
  done.set_ranks_answered(static_cast<uint32_t>(answered.size()));
  done.set_elapsed_ms(ElapsedMs(t0));
  xpu::v1::TimelineDumpMessage m;
  *m.mutable_done() = std::move(done);
  if (!write(m)) return absl::CancelledError("client went away");
  return absl::OkStatus();
}

}  // namespace xpu::engine::timeline
