#include "engine/ingest_service.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/rpc/token.h"
#include "engine/state/batch_decoder.h"

namespace xpu::engine {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("ingest");
  return log;
}

// One warning per second on per-batch paths.
logging::RateLimiter g_unknown_sig_log(1, 1000000000ull);
logging::RateLimiter g_reject_log(1, 1000000000ull);

logging::RateLimiter g_redirect_log(1, 1000000000ull);

}  // namespace

std::string JobIdOf(const xpu::v1::ProcessIdentity& id) {
  return !id.job().empty() ? id.job() : absl::StrCat("pid-", id.pid(), "@", id.host());
}

struct IngestService::Session {
  std::string daemon_id;
  std::string ack_key;  // per stream: acknowledgements of one stream coalesce
  auth::Caller caller;
  // Processes this stream has sent (its cap); only the stream's thread.
  std::set<std::pair<std::string, std::string>> processes;
  // Jobs this replica serves that the stream has sent (engine replicas);
  // only the stream's thread.
  std::set<std::string> served_jobs;
  std::vector<xpu::v1::RejectedProcess> rejected;  // for the next ack; guarded by pending_mu
  // Unconfirmed shed records held, by the batch_seq whose ack carries them
  // (acks coalesce: an ack takes those of its batch and every earlier one);
  // guarded by pending_mu.
  std::vector<std::pair<uint64_t, xpu::v1::ShedHeld>> shed_held;
  IngestStream* stream = nullptr;  // null once the stream ended; guarded by write_mu
  std::mutex write_mu;
  // True until the stream ends; its processes hold it (ProcessState::
  // stream_open) to tell a backlog from a daemon that is gone.
  std::shared_ptr<std::atomic<bool>> open = std::make_shared<std::atomic<bool>>(true);
  std::mutex pending_mu;
  struct Pending {
    std::promise<absl::StatusOr<xpu::v1::CommandReply>> promise;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<uint64_t, Pending> pending;
};

IngestService::IngestService(Registry& registry, Metrics& metrics,
                             const auth::Authorizer& authorizer, std::string engine_id,
                             history::Store* store, IngestLimits limits, int threads)
    : registry_(registry),
      metrics_(metrics),
      authorizer_(authorizer),
      engine_id_(std::move(engine_id)),
      store_(store),
      limits_(limits),
      workers_(threads) {}

// What one stream reads goes to its session; the first message opens it.
class IngestService::Connection final : public IngestStream::Handler {
 public:
  Connection(IngestService* service, IngestStream* stream) : service_(service), stream_(stream) {}

  grpc::Status OnMessage(const xpu::v1::DaemonMessage& m) override {
    if (!session_) return service_->Open(stream_, m, &session_);
    return service_->Dispatch(session_, m);
  }
  void OnEnd(const grpc::Status& why) override {
    if (session_) {
      service_->Close(session_, why);
    } else if (why.ok() && !stream_->cancelled()) {
      service_->metrics_.AddRejected("no_hello");  // closed before saying who it is
    }
  }
  // Includes messages over --max-receive-mb: gRPC refuses those with
  // RESOURCE_EXHAUSTED (the daemon sees that status) before any byte
  // reaches the engine, so this is where they are counted.
  void OnCancelled() override { service_->metrics_.AddRejected("stream_aborted"); }
  void OnWriteBacklog() override {
    service_->metrics_.AddRejected("write_backlog");
    if (g_reject_log.Allow()) {
      Log()->warn("daemon {} did not read the last {} messages the engine wrote; its stream is "
                  "cancelled",
                  session_ ? session_->daemon_id : stream_->context()->peer(),
                  service_->limits_.max_queued_writes);
    }
  }

 private:
  IngestService* const service_;
  IngestStream* const stream_;
  std::shared_ptr<Session> session_;
};

grpc::ServerBidiReactor<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>* IngestService::Stream(
    grpc::CallbackServerContext* ctx) {
  auto* stream = new IngestStream(ctx, &workers_, limits_.max_queued_writes);
  stream->Start(std::make_unique<Connection>(this, stream));
  return stream;
}

grpc::Status IngestService::Handshake(IngestStream* stream, const xpu::v1::DaemonMessage& first,
                                      auth::Caller* caller) {
  grpc::CallbackServerContext* ctx = stream->context();
  if (!first.has_hello()) {
    metrics_.AddRejected("no_hello");
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the first message of Ingest.Stream must be a DaemonHello");
  }
  const xpu::v1::DaemonHello* hello = &first.hello();
  if (hello->protocol_version() != kProtocolVersion) {
    metrics_.AddRejected("protocol_version");
    if (g_reject_log.Allow()) {
      Log()->warn("daemon {} at {} speaks protocol_version {}; rejected", hello->daemon_id(),
                  ctx->peer(), hello->protocol_version());
    }
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("unsupported protocol_version ", hello->protocol_version(),
                                     "; this engine speaks protocol_version ", kProtocolVersion));
  }
  *caller = authorizer_.IdentifyToken(hello->token(), ctx);
  if (caller->permissions == 0) {
    metrics_.AddRejected("token");
    if (g_reject_log.Allow()) Log()->warn("daemon at {} presented no valid credential", ctx->peer());
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "DaemonHello.token is not a credential of this engine (an ingest or "
                        "shared token, or the local identity of the daemon's user)");
  }
  if (!caller->Has(auth::kIngest)) {
    metrics_.AddRejected("permission");
    if (g_reject_log.Allow())
      Log()->warn("{} at {} may not send records", caller->name, ctx->peer());
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(caller->name, " may not send records to this engine"));
  }
  if (hello->daemon_id().empty() || hello->daemon_id().size() > 512) {
    metrics_.AddRejected("hello_invalid");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "DaemonHello.daemon_id must be 1..512 bytes");
  }
  xpu::v1::EngineMessage ack;
  ack.mutable_ack()->set_accepted(true);
  ack.mutable_ack()->set_engine_id(engine_id_);
  ack.mutable_ack()->set_replica_id(replica_id_);
  ack.mutable_ack()->set_compact_records(true);  // DecodeProcessBatch reads both forms
  if (!stream->Write(std::move(ack)))
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream closed during hello");
  return grpc::Status::OK;
}

grpc::Status IngestService::Open(IngestStream* stream, const xpu::v1::DaemonMessage& first,
                                 std::shared_ptr<Session>* out) {
  auth::Caller caller;
  if (grpc::Status st = Handshake(stream, first, &caller); !st.ok()) return st;
  const xpu::v1::DaemonHello& hello = first.hello();
  auto session = std::make_shared<Session>();
  session->daemon_id = hello.daemon_id();
  session->ack_key = absl::StrCat(hello.daemon_id(), "#", next_command_id_.fetch_add(1));
  session->caller = caller;
  session->stream = stream;
  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    sessions_[session->daemon_id] = session;  // a reconnect replaces the old session
  }
  registry_.DaemonConnected(session->daemon_id, hello.host(), hello.version());
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  Log()->info("daemon {} ({}, {}) connected from {} as {}", session->daemon_id, hello.host(),
              hello.version(), stream->context()->peer(), caller.name);
  *out = std::move(session);
  return grpc::Status::OK;
}

grpc::Status IngestService::Dispatch(const std::shared_ptr<Session>& s,
                                     const xpu::v1::DaemonMessage& msg) {
  switch (msg.msg_case()) {
    case xpu::v1::DaemonMessage::kBatch:
      return HandleBatch(s, msg.batch());
    case xpu::v1::DaemonMessage::kHeartbeat:
      registry_.DaemonSeen(s->daemon_id, 0, 0, 0);
      return grpc::Status::OK;
    case xpu::v1::DaemonMessage::kReply:
      registry_.DaemonSeen(s->daemon_id, 0, 0, 0);
      HandleReply(*s, msg.reply());
      return grpc::Status::OK;
    case xpu::v1::DaemonMessage::kHello:
      metrics_.AddRejected("duplicate_hello");
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "DaemonHello may only be the first message of a stream");
    default:
      metrics_.AddRejected("empty_message");
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "DaemonMessage without a payload");
  }
}

void IngestService::Close(const std::shared_ptr<Session>& session, const grpc::Status& why) {
  const std::string& daemon_id = session->daemon_id;
  session->open->store(false, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    auto it = sessions_.find(daemon_id);
    if (it != sessions_.end() && it->second == session) {
      sessions_.erase(it);
      registry_.DaemonDisconnected(daemon_id);
    }
  }
  {
    // `open` is already false: a command that takes pending_mu after this
    // sees it and fails; one before is failed here.
    std::lock_guard<std::mutex> l(session->pending_mu);
    for (auto& [id, p] : session->pending) {
      p.promise.set_value(absl::UnavailableError(
          absl::StrCat("daemon ", daemon_id, " disconnected before replying to command ", id)));
    }
    session->pending.clear();
  }
  IngestStream* stream;
  {
    // After this nothing outside the stream can write on it: it finishes
    // once what is queued is written, and gRPC then deletes it.
    std::lock_guard<std::mutex> l(session->write_mu);
    stream = session->stream;
    session->stream = nullptr;
  }
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  const bool aborted = why.ok() && stream != nullptr && stream->cancelled();
  Log()->info("daemon {} disconnected: {}", daemon_id,
              !why.ok() ? why.error_message() : aborted ? "stream aborted" : "end of stream");
}

grpc::Status IngestService::HandleBatch(const std::shared_ptr<Session>& s,
                                        const xpu::v1::Batch& batch) {
  const std::string& daemon_id = s->daemon_id;
  // Validate the whole batch before applying any of it.
  for (const xpu::v1::ProcessBatch& pb : batch.processes()) {
    absl::Status st = ValidateProcessBatch(pb);
    if (!st.ok()) {
      metrics_.AddRejected(pb.has_identity() ? "record_blob_size" : "no_identity");
      if (g_reject_log.Allow())
        Log()->warn("daemon {}: batch {}: {}", daemon_id, batch.batch_seq(),
                    std::string(st.message()));
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("batch ", batch.batch_seq(), " rejected: ", st.message()));
    }
  }
  std::set<std::string> foreign;
  if (router_) {
    if (grpc::Status st = RouteBatch(s, batch, &foreign); !st.ok()) return st;
  }
  std::vector<history::RankCheckpoint> checkpoints;
  std::vector<xpu::v1::ShedHeld> held;
  uint64_t total = 0;
  for (const xpu::v1::ProcessBatch& pb : batch.processes()) {
    total += BatchRecordCount(pb);
    ApplyProcessBatch(*s, pb, foreign, &checkpoints, &held);
  }
  metrics_.AddBatch();
  registry_.DaemonSeen(daemon_id, 1, total, batch.records_dropped());
  Acknowledge(s, batch.batch_seq(), std::move(checkpoints), std::move(held));
  return grpc::Status::OK;
}

std::string IngestService::Admit(Session& s, const JobState& job,
                                 const xpu::v1::ProcessIdentity& id) const {
  if (job.owner_uid() >= 0 && static_cast<int64_t>(id.uid()) != job.owner_uid())
    return "job_owner";  // a job of another user's name
  const std::string key = JobState::ProcessKey(id);
  if (job.processes().count(key)) return "";
  if (job.processes().size() >= limits_.max_ranks_per_job) return "ranks_per_job";
  if (job.ring_bytes() + job.ring_bytes_per_process() > limits_.max_job_buffer_bytes)
    return "job_buffer";
  if (!s.processes.count({job.job(), key}) &&
      s.processes.size() >= limits_.max_processes_per_stream) {
    return "processes_per_stream";
  }
  return "";
}

void IngestService::Reject(Session& s, const xpu::v1::ProcessBatch& pb, const std::string& job,
                           std::string_view reason) {
  const uint64_t records = BatchRecordCount(pb);
  metrics_.AddRejected(reason);
  if (records > 0) metrics_.AddRejectedRecords(reason, records);
  if (g_reject_log.Allow()) {
    Log()->warn("{} (daemon {}): process rank {} pid {} of job {} refused: {}", s.caller.name,
                s.daemon_id, pb.identity().rank(), pb.identity().pid(), job, reason);
  }
  std::lock_guard<std::mutex> l(s.pending_mu);
  if (s.rejected.size() >= 4096) return;  // the metric counts the rest
  xpu::v1::RejectedProcess* r = &s.rejected.emplace_back();
  r->set_process_key(pb.process_key());
  r->set_reason(std::string(reason));
  r->set_records(records);
}

void IngestService::ApplyAdmitted(Session& s, JobState& job, const xpu::v1::ProcessBatch& pb,
                                  const std::string& job_id, uint64_t now, DecodeStats* stats_out,
                                  std::array<uint64_t, kLossReasons>* lost_delta,
                                  std::vector<history::RankCheckpoint>* checkpoints,
                                  std::vector<xpu::v1::ShedHeld>* held) {
  thread_local std::vector<xpu_record_v1> records;
  DecodeStats& stats = *stats_out;
  const xpu::v1::ProcessIdentity& id = pb.identity();
  ProcessState& p = job.GetOrCreateProcess(id, s.daemon_id, now);
  if (p.stream_open != s.open) p.stream_open = s.open;
  s.processes.insert({job_id, p.key});
  records.clear();
  // Cannot fail: validated above. A compact blob that does not decode costs
  // its sender those records, counted as their own loss reason; the rest of
  // the batch (signatures, counters, windows) still applies.
  std::string decode_error;
  if (const uint64_t n = HeldShedRecords(pb, p.next_position); n > 0) {
    xpu::v1::ShedHeld& h = held->emplace_back();
    h.set_process_key(pb.process_key());
    h.set_records(n);
  }
  DecodeProcessBatch(pb, p.sigs, &records, &stats, &p.next_position, &decode_error).IgnoreError();
  if (!decode_error.empty()) {
    p.lost[kLossRecordUndecodable] += stats.undecodable;
    metrics_.AddRejected("record_undecodable");
    if (g_reject_log.Allow()) {
      Log()->warn("daemon {}: rank {} pid {} of job {}: {} records refused: {}", s.daemon_id,
                  id.rank(), id.pid(), job_id, stats.undecodable, decode_error);
    }
  }
  for (const xpu::v1::Signature& sig : pb.signatures()) {
    if (const SignatureInfo* info = p.sigs.Find(sig.id())) job.NoteSignature(p, *info);
  }
  job.ApplyRecords(p, records.data(), records.size(), now);
  p.unknown_sig += stats.unknown_sig;
  p.duplicates += stats.duplicates;
  job.ApplyCounters(p, pb, now);
  for (int r = 0; r < kLossReasons; ++r) {
    if (p.lost[r] > p.lost_reported[r]) (*lost_delta)[r] = p.lost[r] - p.lost_reported[r];
    p.lost_reported[r] = std::max(p.lost_reported[r], p.lost[r]);
  }
  history::RankCheckpoint c;
  c.job = job_id;
  c.key = p.key;
  c.rank = p.identity.rank();
  c.host = p.identity.host();
  c.pid = p.identity.pid();
  c.local_rank = p.identity.local_rank();
  c.start_ticks = p.identity.start_time_ticks();
  c.uid = p.identity.uid();
  c.records = p.records;
  c.next_position = p.next_position;
  c.undefined_signature = p.unknown_sig;
  checkpoints->push_back(std::move(c));
}

bool IngestService::JobRunning(const std::string& job) const {
  std::shared_ptr<JobState> j = registry_.FindJob(job);
  if (!j) return false;
  std::lock_guard<std::mutex> l(j->mu());
  return j->StateName() != "finished";
}

void IngestService::SetRouter(JobRouter router, std::string replica_id) {
  router_ = std::move(router);
  replica_id_ = std::move(replica_id);
}

grpc::Status IngestService::RouteBatch(const std::shared_ptr<Session>& s,
                                       const xpu::v1::Batch& batch,
                                       std::set<std::string>* foreign) {
  std::map<std::string, JobRoute> routes;
  bool here = false;
  for (const xpu::v1::ProcessBatch& pb : batch.processes()) {
    const xpu::v1::ProcessIdentity& id = pb.identity();
    // Processes the credential does not cover are refused below, unrouted:
    // routing claims the job.
    if (!s->caller.all_jobs && static_cast<int64_t>(id.uid()) != s->caller.uid) continue;
    const std::string job = JobIdOf(id);
    if (routes.count(job)) continue;  // every batch: a job may have moved meanwhile
    JobRoute r = router_(job);
    if (r.kind == JobRoute::kUnavailable) {
      if (g_redirect_log.Allow())
        Log()->warn("daemon {}: batch {} not taken: {}", s->daemon_id, batch.batch_seq(), r.error);
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, r.error);
    }
    if (r.kind == JobRoute::kHere) here = true;
    routes.emplace(job, std::move(r));
  }
  // The stream stays with a job it sends here while that job runs; one
  // that moved away or finished no longer holds it.
  for (auto it = s->served_jobs.begin(); it != s->served_jobs.end() && !here;) {
    auto r = routes.find(*it);
    const bool moved = r != routes.end() ? r->second.kind != JobRoute::kHere
                                         : router_(*it).kind != JobRoute::kHere;
    if (moved || !JobRunning(*it)) {
      it = s->served_jobs.erase(it);
    } else {
      here = true;
    }
  }
  for (auto& [job, r] : routes) {
    if (r.kind == JobRoute::kHere) {
      s->served_jobs.insert(job);
    } else if (here) {
      foreign->insert(job);  // this stream stays with the jobs served here
    } else {
      xpu::v1::EngineMessage m;
      m.mutable_redirect()->set_job(job);
      m.mutable_redirect()->set_replica_id(r.replica_id);
      m.mutable_redirect()->set_address(r.address);
      metrics_.AddRedirect();
      if (g_redirect_log.Allow()) {
        Log()->info("daemon {}: job {} is served by replica {} at {}: redirected", s->daemon_id,
                    job, r.replica_id, r.address);
      }
      std::lock_guard<std::mutex> l(s->write_mu);
      if (s->stream != nullptr) s->stream->Write(std::move(m));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("job ", job, " is served by engine replica ", r.replica_id,
                                       " at ", r.address));
    }
  }
  return grpc::Status::OK;
}

void IngestService::ApplyProcessBatch(Session& s, const xpu::v1::ProcessBatch& pb,
                                      const std::set<std::string>& foreign,
                                      std::vector<history::RankCheckpoint>* checkpoints,
                                      std::vector<xpu::v1::ShedHeld>* held) {
  const uint64_t now = registry_.Now();
  const xpu::v1::ProcessIdentity& id = pb.identity();
  const std::string job_id = JobIdOf(id);
  if (!s.caller.all_jobs && static_cast<int64_t>(id.uid()) != s.caller.uid) {
    Reject(s, pb, job_id, "uid_not_covered");  // a user's daemon sends its user's processes
    return;
  }
  if (foreign.count(job_id)) {
    Reject(s, pb, job_id, "served_elsewhere");  // another replica serves the job
    return;
  }
  std::shared_ptr<JobState> job = registry_.GetOrCreateJob(job_id, id.job_name(), limits_.max_jobs);
  if (!job) {
    Reject(s, pb, job_id, "jobs");
    return;
  }
  metrics_.EnsureJob(job_id, job->job_name());
  DecodeStats stats;
  std::array<uint64_t, kLossReasons> lost_delta{};
  std::string refused;
  {
    std::lock_guard<std::mutex> l(job->mu());
    refused = Admit(s, *job, id);
    if (refused.empty())
      ApplyAdmitted(s, *job, pb, job_id, now, &stats, &lost_delta, checkpoints, held);
  }
  if (!refused.empty()) {
    Reject(s, pb, job_id, refused);
    return;
  }
  if (stats.records) metrics_.AddIngestedRecords(job_id, stats.records);
  for (int r = 0; r < kLossReasons; ++r) {
    if (lost_delta[r]) metrics_.AddDropped(job_id, LossReasonName(r), lost_delta[r]);
  }
  if (stats.duplicates) metrics_.AddSkippedRecords(job_id, "duplicate", stats.duplicates);
  if (stats.unknown_sig) {
    metrics_.AddSkippedRecords(job_id, "unknown_sig", stats.unknown_sig);
    if (g_unknown_sig_log.Allow()) {
      Log()->warn("daemon {}: job {} rank {}: {} records name undefined signatures (counted lost)",
                  s.daemon_id, job_id, id.rank(), stats.unknown_sig);
    }
  }
  if (stats.bad_signatures)
    metrics_.AddSkippedRecords(job_id, "bad_signature", stats.bad_signatures);
}

void IngestService::Acknowledge(const std::shared_ptr<Session>& s, uint64_t batch_seq,
                                std::vector<history::RankCheckpoint> checkpoints,
                                std::vector<xpu::v1::ShedHeld> held) {
  if (!held.empty()) {
    std::lock_guard<std::mutex> l(s->pending_mu);
    for (auto& h : held) s->shed_held.emplace_back(batch_seq, std::move(h));
  }
  std::weak_ptr<Session> weak = s;
  auto send_ack = [weak, batch_seq] {
    std::shared_ptr<Session> session = weak.lock();
    if (!session) return;  // the stream is gone; the daemon sends again
    xpu::v1::EngineMessage m;
    xpu::v1::BatchAck* ack = m.mutable_batch_ack();
    ack->set_batch_seq(batch_seq);
    {
      std::lock_guard<std::mutex> l(session->pending_mu);
      for (auto& r : session->rejected) *ack->add_rejected() = std::move(r);
      session->rejected.clear();
      // Only those of batches this ack covers: a later batch's may not be
      // durable yet.
      auto& sh = session->shed_held;
      auto covered = std::stable_partition(sh.begin(), sh.end(),
                                           [&](const auto& e) { return e.first <= batch_seq; });
      for (auto it = sh.begin(); it != covered; ++it) *ack->add_shed_held() = std::move(it->second);
      sh.erase(sh.begin(), covered);
    }
    if (batch_seq == 0 && ack->rejected_size() == 0) return;
    std::lock_guard<std::mutex> l(session->write_mu);
    if (session->stream != nullptr) session->stream->Write(std::move(m));
  };
  if (store_ == nullptr) {
    send_ack();
    return;
  }
  // Durable first: a restarted engine resumes from these counts, so what it
  // acknowledged is exactly what it will not ask for again.
  store_->EnqueueCheckpoint(std::move(checkpoints), s->ack_key, std::move(send_ack));
}

void IngestService::HandleReply(Session& s, const xpu::v1::CommandReply& reply) {
  std::lock_guard<std::mutex> l(s.pending_mu);
  auto it = s.pending.find(reply.command_id());
  if (it == s.pending.end()) return;  // late or unsolicited: ignore
  it->second.promise.set_value(reply);
  s.pending.erase(it);
}

CommandFuture IngestService::SendCommand(const std::string& daemon_id, xpu::v1::Command cmd) {
  std::promise<absl::StatusOr<xpu::v1::CommandReply>> promise;
  CommandFuture fut = promise.get_future();
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    auto it = sessions_.find(daemon_id);
    if (it != sessions_.end()) s = it->second;
  }
  if (!s) {
    promise.set_value(absl::NotFoundError(absl::StrCat("daemon ", daemon_id, " is not connected")));
    return fut;
  }
  if (cmd.command_id() == 0) cmd.set_command_id(next_command_id_.fetch_add(1));
  const uint64_t id = cmd.command_id();
  {
    std::lock_guard<std::mutex> l(s->pending_mu);
    if (!s->open->load(std::memory_order_relaxed)) {
      promise.set_value(
          absl::UnavailableError(absl::StrCat("daemon ", daemon_id, " disconnected")));
      return fut;
    }
    auto timeout = cmd.deadline_ms() > 0 ? std::chrono::milliseconds(cmd.deadline_ms())
                                         : kDefaultCommandDeadline;
    s->pending.emplace(
        id, Session::Pending{std::move(promise), std::chrono::steady_clock::now() + timeout});
  }
  xpu::v1::EngineMessage m;
  *m.mutable_command() = std::move(cmd);
  bool written = false;
  {
    std::lock_guard<std::mutex> l(s->write_mu);
    if (s->stream != nullptr) written = s->stream->Write(std::move(m));
  }
  if (!written) {
    std::lock_guard<std::mutex> l(s->pending_mu);
    auto it = s->pending.find(id);
    if (it != s->pending.end()) {
      it->second.promise.set_value(
          absl::UnavailableError(absl::StrCat("cannot write to daemon ", daemon_id)));
      s->pending.erase(it);
    }
  }
  return fut;
}

void IngestService::FailAllPending(const absl::Status& why) {
  std::lock_guard<std::mutex> l(sessions_mu_);
  for (auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> pl(s->pending_mu);
    for (auto& [cid, p] : s->pending) p.promise.set_value(why);
    s->pending.clear();
  }
}

size_t IngestService::ExpirePending() {
  const auto now = std::chrono::steady_clock::now();
  size_t n = 0;
  std::lock_guard<std::mutex> l(sessions_mu_);
  for (auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> pl(s->pending_mu);
    for (auto it = s->pending.begin(); it != s->pending.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      it->second.promise.set_value(absl::DeadlineExceededError(
          absl::StrCat("daemon ", id, " did not reply to command ", it->first, " in time")));
      it = s->pending.erase(it);
      ++n;
    }
  }
  return n;
}

}  // namespace xpu::engine
