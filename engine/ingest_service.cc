#include "engine/ingest_service.h"

#include <chrono>
#include <thread>

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

// Read() returns false both for a clean half-close and for a call that gRPC
// failed (oversized message, transport error, client cancel). The sync API
// reports the cancellation asynchronously, so give it a moment to arrive. A
// clean close costs this wait once per daemon disconnect.
bool StreamWasCancelled(grpc::ServerContext* ctx) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
  while (!ctx->IsCancelled()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// One warning per second on per-batch paths.
logging::RateLimiter g_unknown_sig_log(1, 1000000000ull);
logging::RateLimiter g_reject_log(1, 1000000000ull);
logging::RateLimiter g_redirect_log(1, 1000000000ull);

std::string JobId(const xpu::v1::ProcessIdentity& id) {
  return !id.job().empty() ? id.job() : absl::StrCat("pid-", id.pid(), "@", id.host());
}

}  // namespace

struct IngestService::Session {
  std::string daemon_id;
  // "daemon_id#incarnation": names the daemon's batch_seq sequence; empty
  // for a daemon that neither keeps batches for acks nor follows redirects.
  std::string stream_key;
  Stream_t* stream = nullptr;
  std::atomic<uint64_t> batches{0};  // Batch messages handled (reader thread writes)
  uint64_t acked = 0;                // under write_mu
  std::mutex jobs_mu;
  std::set<std::string> jobs;  // jobs whose records this stream carried here
  std::mutex write_mu;  // serializes writes on `stream`
  std::mutex pending_mu;
  bool closed = false;  // guarded by pending_mu
  struct Pending {
    std::promise<absl::StatusOr<xpu::v1::CommandReply>> promise;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<uint64_t, Pending> pending;
};

IngestService::IngestService(Registry& registry, Metrics& metrics, std::string token,
                             std::string engine_id)
    : registry_(registry),
      metrics_(metrics),
      token_(std::move(token)),
      engine_id_(std::move(engine_id)) {}

grpc::Status IngestService::Handshake(grpc::ServerContext* ctx, Stream_t* stream,
                                      xpu::v1::DaemonHello* hello) {
  xpu::v1::DaemonMessage first;
  if (!stream->Read(&first)) {
    metrics_.AddRejected("stream_aborted");
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream ended before DaemonHello");
  }
  if (!first.has_hello()) {
    metrics_.AddRejected("no_hello");
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the first message of Ingest.Stream must be a DaemonHello");
  }
  *hello = first.hello();
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
  if (!token_.empty() && !rpc::TokensEqual(hello->token(), token_)) {
    metrics_.AddRejected("token");
    if (g_reject_log.Allow()) Log()->warn("daemon at {} presented a wrong token", ctx->peer());
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "DaemonHello.token does not match the engine's --token-file");
  }
  if (hello->daemon_id().empty() || hello->daemon_id().size() > 512) {
    metrics_.AddRejected("hello_invalid");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "DaemonHello.daemon_id must be 1..512 bytes");
  }
  {
    // Until the engine knows its replica id and lease, it cannot tell which
    // jobs are its own.
    std::unique_lock<std::mutex> l(ready_mu_);
    if (!ready_cv_.wait_for(l, std::chrono::seconds(30), [&] { return ready_; })) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "engine starting");
    }
  }
  xpu::v1::EngineMessage ack;
  ack.mutable_ack()->set_accepted(true);
  ack.mutable_ack()->set_engine_id(engine_id_);
  ack.mutable_ack()->set_replica_id(replica_id_);
  ack.mutable_ack()->set_acks_batches(hello->incarnation() != 0);
  if (!stream->Write(ack))
    return grpc::Status(grpc::StatusCode::CANCELLED, "stream closed during hello");
  return grpc::Status::OK;
}

grpc::Status IngestService::Stream(grpc::ServerContext* ctx, Stream_t* stream) {
  xpu::v1::DaemonHello hello;
  if (grpc::Status st = Handshake(ctx, stream, &hello); !st.ok()) return st;
  const std::string daemon_id = hello.daemon_id();
  auto session = std::make_shared<Session>();
  session->daemon_id = daemon_id;
  if (hello.incarnation() != 0)
    session->stream_key = absl::StrCat(daemon_id, "#", hello.incarnation());
  session->stream = stream;
  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    sessions_[daemon_id] = session;  // a reconnect replaces the old session
  }
  registry_.DaemonConnected(daemon_id, hello.host(), hello.version());
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  Log()->info("daemon {} ({}, {}) connected from {}", daemon_id, hello.host(), hello.version(),
              ctx->peer());

  grpc::Status result = grpc::Status::OK;
  xpu::v1::DaemonMessage msg;
  while (true) {
    if (!stream->Read(&msg)) {
      if (StreamWasCancelled(ctx)) {
        // Includes messages over --max-receive-mb: gRPC rejects those with
        // RESOURCE_EXHAUSTED (the daemon sees that status) before any byte
        // reaches us, so this is where they are counted.
        metrics_.AddRejected("stream_aborted");
        result = grpc::Status(grpc::StatusCode::CANCELLED, "stream aborted");
      }
      break;
    }
    switch (msg.msg_case()) {
      case xpu::v1::DaemonMessage::kBatch:
        result = HandleBatch(*session, msg.batch());
        break;
      case xpu::v1::DaemonMessage::kHeartbeat:
        registry_.DaemonSeen(daemon_id, 0, 0, 0);
        break;
      case xpu::v1::DaemonMessage::kReply:
        registry_.DaemonSeen(daemon_id, 0, 0, 0);
        HandleReply(*session, msg.reply());
        break;
      case xpu::v1::DaemonMessage::kHello:
        metrics_.AddRejected("duplicate_hello");
        result = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "DaemonHello may only be the first message of a stream");
        break;
      default:
        metrics_.AddRejected("empty_message");
        result =
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "DaemonMessage without a payload");
        break;
    }
    if (!result.ok()) break;
  }

  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    auto it = sessions_.find(daemon_id);
    if (it != sessions_.end() && it->second == session) {
      sessions_.erase(it);
      registry_.DaemonDisconnected(daemon_id);
    }
  }
  {
    std::lock_guard<std::mutex> l(session->pending_mu);
    session->closed = true;
    for (auto& [id, p] : session->pending) {
      p.promise.set_value(absl::UnavailableError(
          absl::StrCat("daemon ", daemon_id, " disconnected before replying to command ", id)));
    }
    session->pending.clear();
  }
  {
    // After this no SendCommand can touch the stream object gRPC is about to
    // destroy.
    std::lock_guard<std::mutex> l(session->write_mu);
    session->stream = nullptr;
  }
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  Log()->info("daemon {} disconnected: {}", daemon_id,
              result.ok() ? "end of stream" : result.error_message());
  return result;
}

void IngestService::SetOwnership(replica::Ownership* ownership, std::string replica_id,
                                 replica::ReplicaMetrics* replica_metrics) {
  {
    std::lock_guard<std::mutex> l(ready_mu_);
    ownership_ = ownership;
    replica_metrics_ = replica_metrics;
    replica_id_ = std::move(replica_id);
    ready_ = true;
  }
  ready_cv_.notify_all();
}

bool IngestService::WriteTo(Session& s, const xpu::v1::EngineMessage& m) {
  std::lock_guard<std::mutex> l(s.write_mu);
  return s.stream != nullptr && s.stream->Write(m);
}

grpc::Status IngestService::RouteBatch(Session& s, const xpu::v1::Batch& batch,
                                       std::set<std::string>* skip) {
  if (ownership_ == nullptr) return grpc::Status::OK;
  std::set<std::string> checked;
  for (const xpu::v1::ProcessBatch& pb : batch.processes()) {
    const std::string job = JobId(pb.identity());
    if (!checked.insert(job).second) continue;
    const replica::Verdict v = ownership_->Check(job);
    if (v.kind == replica::Verdict::kMine) continue;
    if (v.kind == replica::Verdict::kUnknown) {
      metrics_.AddRejected("owner_unknown");
      if (g_reject_log.Allow()) Log()->warn("daemon {}: {}", s.daemon_id, v.error);
      // The daemon reconnects and sends what was not acknowledged again.
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, v.error);
    }
    if (s.stream_key.empty()) {
      metrics_.AddRejected("wrong_replica");
      return grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat("job ", job, " is served by engine replica ", v.owner, " at ", v.address,
                       "; this xpu-daemon cannot follow redirects: upgrade it or point it there"));
    }
    skip->insert(job);
    xpu::v1::EngineMessage m;
    m.mutable_redirect()->set_job(job);
    m.mutable_redirect()->set_replica_id(v.owner);
    m.mutable_redirect()->set_address(v.address);
    if (replica_metrics_ != nullptr) replica_metrics_->AddRedirect();
    if (g_redirect_log.Allow()) {
      Log()->info("daemon {}: job {} is served by replica {} at {}: redirected", s.daemon_id, job,
                  v.owner, v.address);
    }
    if (!WriteTo(s, m)) return grpc::Status(grpc::StatusCode::CANCELLED, "stream closed");
  }
  return grpc::Status::OK;
}

grpc::Status IngestService::HandleBatch(Session& s, const xpu::v1::Batch& batch) {
  const std::string& daemon_id = s.daemon_id;
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
  std::set<std::string> elsewhere;
  if (grpc::Status st = RouteBatch(s, batch, &elsewhere); !st.ok()) return st;
  thread_local std::vector<xpu_record_v1> records;
  const uint64_t now = registry_.Now();
  // Replays are recognised per job by the stream's batch_seq (0: the state
  // a daemon re-sends after connecting, never a replay).
  const bool dedup = !s.stream_key.empty() && batch.batch_seq() > 0;
  // The verdict of each job, taken at its first process in the batch (the
  // batch's other processes of the job share it).
  std::map<std::string, bool> replay_of;
  uint64_t total = 0;
  for (const xpu::v1::ProcessBatch& pb : batch.processes()) {
    const xpu::v1::ProcessIdentity& id = pb.identity();
    const std::string job_id = JobId(id);
    if (elsewhere.count(job_id)) continue;
    std::shared_ptr<JobState> job = registry_.GetOrCreateJob(job_id, id.job_name());
    DecodeStats stats;
    uint64_t dropped_delta = 0;
    {
      std::lock_guard<std::mutex> l(job->mu());
      ProcessState& p = job->GetOrCreateProcess(id, daemon_id, now);
      records.clear();
      // Cannot fail: validated above.
      DecodeProcessBatch(pb, p.sigs, &records, &stats).IgnoreError();
      for (const xpu::v1::Signature& sig : pb.signatures()) {
        if (const SignatureInfo* info = p.sigs.Find(sig.id())) job->NoteSignature(p, *info);
      }
      bool replay = false;
      if (dedup) {
        auto [verdict, first] = replay_of.emplace(job_id, false);
        if (first) {
          uint64_t& last = job->stream_seq()[s.stream_key];
          verdict->second = batch.batch_seq() <= last;
          if (!verdict->second) last = batch.batch_seq();
        }
        replay = verdict->second;
      }
      if (replay) {
        stats.records = 0;  // held already: identity and signatures only
      } else {
        job->ApplyRecords(p, records.data(), records.size(), now);
        p.unknown_sig += stats.unknown_sig;
        const uint64_t dropped_before = p.dropped;
        job->ApplyCounters(p, pb, now);
        if (p.dropped > dropped_before) dropped_delta = p.dropped - dropped_before;
      }
    }
    {
      std::lock_guard<std::mutex> l(s.jobs_mu);
      s.jobs.insert(job_id);
    }
    total += stats.records;
    if (stats.records) metrics_.AddIngestedRecords(job_id, stats.records);
    if (dropped_delta) metrics_.AddDropped(job_id, dropped_delta);
    if (stats.unknown_sig) {
      metrics_.AddSkippedRecords(job_id, "unknown_sig", stats.unknown_sig);
      if (g_unknown_sig_log.Allow()) {
        Log()->warn("daemon {}: job {} rank {}: {} records name undefined signatures (skipped)",
                    daemon_id, job_id, id.rank(), stats.unknown_sig);
      }
    }
    if (stats.bad_signatures)
      metrics_.AddSkippedRecords(job_id, "bad_signature", stats.bad_signatures);
  }
  metrics_.AddBatch();
  registry_.DaemonSeen(daemon_id, 1, total, batch.records_dropped());
  s.batches.fetch_add(1);
  return grpc::Status::OK;
}

std::vector<IngestService::AckPoint> IngestService::SnapshotBatches() {
  std::vector<AckPoint> out;
  std::lock_guard<std::mutex> l(sessions_mu_);
  for (const auto& [id, s] : sessions_) {
    if (!s->stream_key.empty()) out.push_back(AckPoint{s, s->batches.load()});
  }
  return out;
}

void IngestService::Acknowledge(const std::vector<AckPoint>& points) {
  for (const AckPoint& p : points) {
    std::shared_ptr<Session> s = p.session.lock();
    if (!s) continue;
    std::lock_guard<std::mutex> l(s->write_mu);
    if (s->stream == nullptr || p.batches <= s->acked) continue;
    xpu::v1::EngineMessage m;
    m.mutable_batch_ack()->set_batches(p.batches);
    if (s->stream->Write(m)) s->acked = p.batches;
  }
}

void IngestService::RedirectJob(const std::string& job, const std::string& owner,
                                const std::string& address) {
  std::vector<std::shared_ptr<Session>> carriers;
  {
    std::lock_guard<std::mutex> l(sessions_mu_);
    for (const auto& [id, s] : sessions_) {
      std::lock_guard<std::mutex> jl(s->jobs_mu);
      if (s->jobs.erase(job)) carriers.push_back(s);
    }
  }
  xpu::v1::EngineMessage m;
  m.mutable_redirect()->set_job(job);
  m.mutable_redirect()->set_replica_id(owner);
  m.mutable_redirect()->set_address(address);
  for (const std::shared_ptr<Session>& s : carriers) {
    if (s->stream_key.empty()) continue;  // cannot follow: its next batch of the job closes it
    WriteTo(*s, m);
  }
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
    if (s->closed) {
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
    if (s->stream != nullptr) written = s->stream->Write(m);
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
