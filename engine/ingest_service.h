// ingest_service — the Ingest.Stream endpoint: one long-lived bidirectional
// stream per daemon.
//
// Protocol: the first message must be a DaemonHello with protocol_version 1
// (else FAILED_PRECONDITION) and, when the engine has a token, the right
// token (else UNAUTHENTICATED). Then Batch / Heartbeat / CommandReply
// messages. A Batch is validated as a whole before any of it is applied; a
// records blob whose size is not a multiple of 32 rejects the batch with
// INVALID_ARGUMENT and closes the stream (the proto has no per-batch reply,
// so closing is the only way the daemon learns of it; it reconnects).
// Records naming a sig_id never defined are skipped and counted.
//
// Engine replicas (docs/architecture.md, "Engine replicas"): every job is
// served by one replica (replica/ownership.h). A batch's records of a job
// another replica serves are not applied; the stream gets a JobRedirect with
// that replica's address. A daemon that says DaemonHello.incarnation keeps
// its batches until they are acknowledged: after each window is committed
// the engine sends BatchAck with the number of Batch messages of the stream
// handled before the window closed. Records of a batch the job already
// holds (same stream, batch_seq at or below the job's stream_seq, restored
// from the database by a replica taking the job over) are replays and are
// not applied again. A daemon without incarnation gets neither acks nor
// redirects: a batch of a job served elsewhere closes its stream with
// FAILED_PRECONDITION naming the replica to use.
//
// Hot path: per ProcessBatch one registry lookup and one job lock; records
// are memcpy'd out of the blob into a per-thread buffer and applied in bulk.
// No per-record protobuf objects, no per-record logging.
//
// Threading: gRPC's sync server runs each stream on its own thread.
// SendCommand may be called from any thread; it writes on the daemon's
// stream under that session's write lock (gRPC allows one reader and one
// writer concurrently).
#ifndef XPU_ENGINE_INGEST_SERVICE_H_
#define XPU_ENGINE_INGEST_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <set>
#include <vector>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "engine/metrics.h"
#include "engine/replica/ownership.h"
#include "engine/replica/replica_metrics.h"
#include "engine/state/command.h"
#include "engine/state/registry.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::engine {

class IngestService final : public xpu::v1::Ingest::Service {
 public:
  struct Session;  // one daemon stream (ingest_service.cc)
  // A stream and how many of its Batch messages were handled: acknowledged
  // once the window that holds them is committed.
  struct AckPoint {
    std::weak_ptr<Session> session;
    uint64_t batches = 0;
  };

  // token empty = no token required.
  IngestService(Registry& registry, Metrics& metrics, std::string token, std::string engine_id);

  // Who serves each job. Streams wait in their handshake until it is set
  // (the engine sets it right after the server starts); null = every job is
  // served here.
  void SetOwnership(replica::Ownership* ownership, std::string replica_id,
                    replica::ReplicaMetrics* replica_metrics);
  std::vector<AckPoint> SnapshotBatches();
  void Acknowledge(const std::vector<AckPoint>& points);
  // Tells every stream that carried `job` where it is served now.
  void RedirectJob(const std::string& job, const std::string& owner, const std::string& address);

  grpc::Status Stream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<xpu::v1::EngineMessage, xpu::v1::DaemonMessage>* stream) override;

  // Sends `cmd` to the daemon's stream; the future resolves with its
  // CommandReply, or an error when the daemon is not connected or its stream
  // ends first. command_id is assigned when 0.
  CommandFuture SendCommand(const std::string& daemon_id, xpu::v1::Command cmd);

  // Ends every pending command (shutdown).
  void FailAllPending(const absl::Status& why);
  // Fails commands whose deadline passed (Command.deadline_ms, default
  // kDefaultCommandDeadline); called by the window thread. Returns how many.
  size_t ExpirePending();
  static constexpr std::chrono::milliseconds kDefaultCommandDeadline{60000};

 private:
  using Stream_t = grpc::ServerReaderWriter<xpu::v1::EngineMessage, xpu::v1::DaemonMessage>;

  grpc::Status Handshake(grpc::ServerContext* ctx, Stream_t* stream, xpu::v1::DaemonHello* hello);
  grpc::Status HandleBatch(Session& s, const xpu::v1::Batch& batch);
  // Which jobs of `batch` are served here; redirects the others. Not OK
  // when the stream must end (ownership unknown, daemon cannot redirect).
  grpc::Status RouteBatch(Session& s, const xpu::v1::Batch& batch, std::set<std::string>* skip);
  void HandleReply(Session& s, const xpu::v1::CommandReply& reply);
  bool WriteTo(Session& s, const xpu::v1::EngineMessage& m);

  Registry& registry_;
  Metrics& metrics_;
  const std::string token_;
  const std::string engine_id_;
  std::atomic<uint64_t> next_command_id_{1};
  std::mutex ready_mu_;
  std::condition_variable ready_cv_;
  bool ready_ = false;
  replica::Ownership* ownership_ = nullptr;  // set once before ready_
  replica::ReplicaMetrics* replica_metrics_ = nullptr;
  std::string replica_id_;
  std::mutex sessions_mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_INGEST_SERVICE_H_
