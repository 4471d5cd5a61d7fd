// engine_client.h — the daemon's gRPC streams to the engine (Ingest.Stream).
//
// One long-lived bidirectional stream per engine replica it talks to: the
// configured engine address (`--engine`; a Service or a list of replicas)
// and, when a replica answers that one of this node's jobs is served by
// another replica (JobRedirect), a stream to that replica for that job's
// processes. Each connection starts with a DaemonHello (protocol_version 1,
// daemon_id, host, token, incarnation) and waits for the engine's HelloAck;
// then it sends the identity and full signature table of every live process
// whose job goes there (the engine may have restarted) and the buffered
// batches in order. Commands from an engine are handed to the
// CommandHandler on that stream's reader thread; replies go back on the
// same stream.
//
// Routing: batch_seq is assigned once per batch (Enqueue) and kept by
// every part of it, whichever replica the part goes to. A job's batches go
// to the replica it was redirected to; when that replica cannot be reached
// (or its stream breaks), they go back to the configured address, and the
// replica is not tried again for a short, growing pause (0.5 s up to 5 s):
// a redirect to it meanwhile parks the job's batches until the pause ends.
// A job that moves takes its processes' identities and signature tables
// along first, so the replica serving it next can decode its records.
//
// Acknowledgements: with an engine that acknowledges batches
// (HelloAck.acks_batches), a batch stays in memory after it is written
// until a BatchAck says the engine committed it; when the stream breaks,
// or the job moves, the unacknowledged batches are sent again (the engine
// recognises the ones it holds already by batch_seq). Without, a batch is
// forgotten once written, as before.
//
// Buffering: per stream, queued and unacknowledged batches are bounded by
// `buffer_bytes`. Past it, the oldest queued batches lose their records and
// windows (counted as batches_dropped / records_dropped, cumulative in every
// later Batch, and per process in ProcessCounters.records_dropped_daemon)
// while their identity, signatures and exit flag are merged into the next
// batch, so an engine never sees a record whose signature it missed; then
// the oldest unacknowledged batches are forgotten (counted as
// batches_unacked_forgotten: delivered, but no longer replayable).
// Reconnects back off exponentially (0.5 s → 10 s).
//
// Threads: per stream a writer thread (connects, writes) and, per
// connection, a reader thread; one more thread releases parked jobs.
// Enqueue/stats/Stop are thread-safe; one mutex guards all of it.
#ifndef XPU_DAEMON_ENGINE_CLIENT_H_
#define XPU_DAEMON_ENGINE_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/collector.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

struct EngineClientOptions {
  std::string target = "127.0.0.1:7441";
  std::string daemon_id;
  std::string host;
  std::string version;
  std::string token;
  // PEM file paths. A CA enables TLS (the engine's certificate is verified);
  // cert+key add client authentication.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Allow plaintext to a non-loopback target.
  bool insecure = false;
  uint64_t buffer_bytes = 64ull << 20;
  uint64_t backoff_initial_ms = 500;
  uint64_t backoff_max_ms = 10000;
  uint64_t ack_timeout_ms = 10000;
  uint64_t heartbeat_ms = 5000;
  // Pause before a replica that could not be reached is tried again.
  uint64_t replica_retry_initial_ms = 500;
  uint64_t replica_retry_max_ms = 5000;
};

struct EngineClientStats {
  bool connected = false;  // the stream to the configured address
  uint64_t connects = 0;   // successful handshakes, all streams
  uint64_t connect_failures = 0;
  uint64_t batches_sent = 0;
  uint64_t batches_dropped = 0;
  uint64_t records_dropped = 0;
  uint64_t batches_buffered = 0;  // queued, not yet written
  uint64_t bytes_buffered = 0;    // queued and unacknowledged
  uint64_t batches_unacked = 0;   // written, waiting for the engine's BatchAck
  uint64_t batches_unacked_forgotten = 0;
  uint64_t commands = 0;
  uint64_t redirects = 0;         // JobRedirect messages followed
  uint64_t replica_streams = 0;   // streams to redirect targets open now
};

// True for targets that stay on this host (localhost, 127.0.0.0/8, ::1, unix:).
bool IsLoopbackTarget(const std::string& target);

class EngineClient {
 public:
  // Checks the transport-security rules and reads the PEM files.
  static absl::StatusOr<std::unique_ptr<EngineClient>> Create(const EngineClientOptions& options,
                                                              CommandHandler* handler,
                                                              StateProvider* state);
  ~EngineClient();
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  void Start();
  void Stop();
  // Queues a batch (batch_seq is assigned here). Never blocks on the network.
  void Enqueue(xpu::v1::Batch batch);
  EngineClientStats stats() const;

 private:
  struct Conn;  // one stream to one replica (engine_connection.cc)
  using Stream = grpc::ClientReaderWriter<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>;
  struct Item {
    xpu::v1::Batch batch;
    size_t bytes = 0;
  };

  EngineClient(const EngineClientOptions& options, std::shared_ptr<grpc::ChannelCredentials> creds,
               CommandHandler* handler, StateProvider* state);

  // engine_client.cc: routing, buffering.
  Conn* ConnFor(const std::string& job);  // needs mu_
  Conn* GetOrStartConn(const std::string& address);  // needs mu_
  void Push(Conn* c, xpu::v1::Batch batch);  // needs mu_
  // The job's parts of every batch of every stream (and parked), oldest
  // first; sent ones stay as (maybe empty) items so acknowledgements still
  // count right.
  std::vector<xpu::v1::Batch> TakeJob(const std::string& job);  // needs mu_
  // Identity and signatures of the processes of `job` (or of every job
  // routed to `c` when job is empty), as a batch_seq 0 batch.
  xpu::v1::Batch StateBatch(const std::string& job, const Conn* c);  // needs mu_
  void MoveJob(const std::string& job, Conn* to);  // needs mu_
  void OnRedirect(Conn* from, const xpu::v1::JobRedirect& r);
  void OnReplicaFailed(Conn* c);
  void ParkLoop();
  void EnforceBudgetLocked(Conn* c);
  void PrepareForSend(xpu::v1::Batch* batch);  // needs mu_
  bool RoutedTo(const std::string& job, const Conn* c) const;  // needs mu_

  // engine_connection.cc: one stream's life.
  void Run(Conn* c);
  bool RunConnection(Conn* c);  // true if the handshake succeeded
  void ReadStream(Conn* c, Stream* stream);
  void QueueReply(Conn* c, xpu::v1::CommandReply reply);
  bool Handshake(Conn* c, Stream* stream);
  bool Resync(Conn* c, Stream* stream);
  void SendUntilBroken(Conn* c, Stream* stream);
  void OnAck(Conn* c, uint64_t batches);  // needs mu_
  void Requeue(Conn* c);                  // sent -> pending, needs mu_

  const EngineClientOptions options_;
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  CommandHandler* const handler_;
  StateProvider* const state_;
  const uint64_t incarnation_;

  mutable std::mutex mu_;
  std::condition_variable park_cv_;
  bool running_ = false;
  std::unique_ptr<Conn> default_;                         // the configured address
  std::map<std::string, std::unique_ptr<Conn>> replicas_;  // redirect targets by address
  std::vector<std::unique_ptr<Conn>> retired_;             // failed targets, joined later
  std::map<std::string, std::string> routes_;  // job -> replica address
  struct Parked {
    uint64_t until_ns = 0;  // monotonic
    std::vector<xpu::v1::Batch> batches;
  };
  std::map<std::string, Parked> parked_;  // job -> batches waiting for a retry
  struct Down {
    uint64_t until_ns = 0;
    uint64_t pause_ms = 0;
  };
  std::map<std::string, Down> down_;  // replica address -> not before
  uint64_t next_seq_ = 1;
  std::map<uint64_t, uint64_t> dropped_by_process_;
  EngineClientStats stats_;
  std::thread park_thread_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_ENGINE_CLIENT_H_
