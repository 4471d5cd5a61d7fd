// ingest_service — the Ingest.Stream endpoint: one long-lived bidirectional
// stream per daemon.
//
// Protocol: the first message must be a DaemonHello with protocol_version 1
// (else FAILED_PRECONDITION) carrying a credential with the ingest
// permission (engine/auth/authorizer.h; else UNAUTHENTICATED or
// PERMISSION_DENIED). Then Batch / Heartbeat / CommandReply messages. A
// Batch is validated as a whole before any of it is applied; a records blob
// whose size is not a multiple of 32 rejects the batch with
// INVALID_ARGUMENT and closes the stream. Records naming a sig_id never
// defined are skipped and counted against their rank
// (undefined_signature); records below the rank's next ring position were
// received before (a daemon sending again after a reconnect or restart)
// and are skipped without being counted twice.
//
// Trust and caps: a daemon whose credential covers one uid (a local user's
// daemon) may only send processes of that uid, and no process may join a
// job of another uid. New processes beyond the caps (processes per stream,
// ranks per job, jobs, bytes of records buffered per job) are refused. A
// refused process costs its sender nothing but a counter: it is named in
// the batch's acknowledgement (BatchAck.rejected, so the daemon counts its
// records as lost) and in xpu_ingest_rejected_total{reason}.
//
// Acknowledgement: after each batch the counts and ring positions of the
// ranks it touched go to the history database as a checkpoint; once that is
// durable the daemon gets a BatchAck and may forget the batch. A restarted
// engine resumes each rank from its checkpoint, so records never
// acknowledged are sent again and none is counted twice.
//
// Engine replicas (docs/deploy.md, "Engine replicas sharing PostgreSQL"):
// with a router (SetRouter), the jobs of each batch are routed before any
// of it is applied. A job served by another replica gets the daemon a
// JobRedirect to that replica and the stream ends, unless the stream
// sends a running job this replica serves (in this batch or before): then
// only the foreign job's processes are refused (reason served_elsewhere,
// counted lost by the daemon), since one stream cannot follow both. A job
// whose owner cannot be known now (database unreachable) ends the stream
// with UNAVAILABLE; the daemon sends the batch again later. Nothing of a
// refused or redirected batch is applied or acknowledged.
//
// Hot path: per ProcessBatch one registry lookup and one job lock; records
// are memcpy'd out of the blob into a per-thread buffer and applied in bulk.
// No per-record protobuf objects, no per-record logging.
//
// Threading: streams are on gRPC's callback API (engine/ingest_stream.h):
// what they read is handled on `threads` worker threads, one message of a
// stream at a time, whatever the number of daemons. SendCommand may be
// called from any thread; it queues the command on the daemon's stream.
#ifndef XPU_ENGINE_INGEST_SERVICE_H_
#define XPU_ENGINE_INGEST_SERVICE_H_

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/auth/authorizer.h"
#include "engine/history/store.h"
#include "engine/ingest_stream.h"
#include "engine/metrics.h"
#include "engine/state/batch_decoder.h"
#include "engine/state/command.h"
#include "engine/state/registry.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::engine {

// Which engine replica serves a job (engine replicas sharing a database).
struct JobRoute {
  enum Kind { kHere, kElsewhere, kUnavailable };
  Kind kind = kHere;
  std::string replica_id;  // kElsewhere: the owner
  std::string address;     // kElsewhere: where daemons reach it
  std::string error;       // kUnavailable: why
};
using JobRouter = std::function<JobRoute(const std::string& job)>;

// The job id of a process: its job, or "pid-PID@HOST" for a process started
// outside a job.
std::string JobIdOf(const xpu::v1::ProcessIdentity& id);

// Caps on what one stream or job may make the engine hold.
struct IngestLimits {
  size_t max_jobs = 1024;
  size_t max_ranks_per_job = 131072;
  size_t max_processes_per_stream = 8192;
  uint64_t max_job_buffer_bytes = 64ull << 30;  // recent-record rings of one job
  // Messages queued for one daemon that it has not read yet (acknowledgements,
  // commands): one more cancels its stream.
  size_t max_queued_writes = 1024;
};

class IngestService final : public xpu::v1::Ingest::CallbackService {
 public:
  // `store` null: batches are acknowledged at once (nothing is durable).
  // `threads`: the workers that handle what the streams read.
  IngestService(Registry& registry, Metrics& metrics, const auth::Authorizer& authorizer,
                std::string engine_id, history::Store* store, IngestLimits limits,
                int threads = kDefaultThreads);
  static constexpr int kDefaultThreads = 4;
  // Destroy after the server's Shutdown: the streams gRPC ends then are
  // finished on this service's workers.
  ~IngestService() override = default;

  grpc::ServerBidiReactor<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>* Stream(
      grpc::CallbackServerContext* ctx) override;

  // Sends `cmd` to the daemon's stream; the future resolves with its
  // CommandReply, or an error when the daemon is not connected or its stream
  // ends first. command_id is assigned when 0.
  CommandFuture SendCommand(const std::string& daemon_id, xpu::v1::Command cmd);

  // Engine replicas: routes every job before its records are applied.
  // Call before the server starts.
  void SetRouter(JobRouter router, std::string replica_id);

  // Ends every pending command (shutdown).
  void FailAllPending(const absl::Status& why);
  // Fails commands whose deadline passed (Command.deadline_ms, default
  // kDefaultCommandDeadline); called by the window thread. Returns how many.
  size_t ExpirePending();
  static constexpr std::chrono::milliseconds kDefaultCommandDeadline{60000};

 private:
  struct Session;
  class Connection;

  // The stream's first message: a valid hello opens its session (`*out`).
  grpc::Status Open(IngestStream* stream, const xpu::v1::DaemonMessage& first,
                    std::shared_ptr<Session>* out);
  grpc::Status Handshake(IngestStream* stream, const xpu::v1::DaemonMessage& first,
                         auth::Caller* caller);
  // Every later message of the session's stream.
  grpc::Status Dispatch(const std::shared_ptr<Session>& s, const xpu::v1::DaemonMessage& msg);
  // The session's stream ended with `why`.
  void Close(const std::shared_ptr<Session>& s, const grpc::Status& why);
  grpc::Status HandleBatch(const std::shared_ptr<Session>& s, const xpu::v1::Batch& batch);
  // Whether the process of `pb` may be applied: the reason if not. Caller
  // holds job->mu().
  std::string Admit(Session& s, const JobState& job, const xpu::v1::ProcessIdentity& id) const;
  // Adds to `held` the process's unconfirmed shed records that the engine
  // already holds (ProcessBatch.unconfirmed_shed).
  void ApplyProcessBatch(Session& s, const xpu::v1::ProcessBatch& pb,
                         const std::set<std::string>& foreign,
                         std::vector<history::RankCheckpoint>* checkpoints,
                         std::vector<xpu::v1::ShedHeld>* held);
  // The records, signatures and counters of an admitted process; its
  // checkpoint. Caller holds job.mu().
  void ApplyAdmitted(Session& s, JobState& job, const xpu::v1::ProcessBatch& pb,
                     const std::string& job_id, uint64_t now, DecodeStats* stats,
                     std::array<uint64_t, kLossReasons>* lost_delta,
                     std::vector<history::RankCheckpoint>* checkpoints,
                     std::vector<xpu::v1::ShedHeld>* held);
  void Reject(Session& s, const xpu::v1::ProcessBatch& pb, const std::string& job,
              std::string_view reason);
  // Checkpoints the batch, then acknowledges it on the session's stream,
  // with what it held of the batch's unconfirmed shed records.
  void Acknowledge(const std::shared_ptr<Session>& s, uint64_t batch_seq,
                   std::vector<history::RankCheckpoint> checkpoints,
                   std::vector<xpu::v1::ShedHeld> held);
  void HandleReply(Session& s, const xpu::v1::CommandReply& reply);
  // Routes the batch's jobs (SetRouter): OK with the jobs this stream must
  // refuse in `foreign`, or the status that ends the stream (a redirect was
  // sent, or the owner is unknown now).
  grpc::Status RouteBatch(const std::shared_ptr<Session>& s, const xpu::v1::Batch& batch,
                          std::set<std::string>* foreign);
  bool JobRunning(const std::string& job) const;  // live here and not finished

  Registry& registry_;
  Metrics& metrics_;
  const auth::Authorizer& authorizer_;
  const std::string engine_id_;
  history::Store* const store_;
  const IngestLimits limits_;
  JobRouter router_;  // null: every job is served here
  std::string replica_id_;
  std::atomic<uint64_t> next_command_id_{1};
  std::mutex sessions_mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
  IngestWorkers workers_;  // last: stopped first
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_INGEST_SERVICE_H_
