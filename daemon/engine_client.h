// engine_client.h — the daemon's gRPC stream to the engine (Ingest.Stream).
//
// One long-lived bidirectional stream. Each connection starts with a
// DaemonHello (protocol_version 1, daemon_id, host, token) and waits for the
// engine's HelloAck; then it re-sends the identity and full signature table
// of every live process (the engine may have restarted) and the buffered
// batches in order. Commands from the engine are handed to a CommandHandler
// on the stream's reader thread; replies are written by the writer thread.
//
// Delivery: the engine acknowledges batches once it has recorded them
// durably (BatchAck); a written batch stays in `unacked_` until then, and
// after a reconnect the unacknowledged batches are sent again (after the
// definitions: the identity and signatures of every process that still has
// a batch here, so that a restarted engine knows every signature a record
// names). The engine drops records it already has by ring position. An ack
// moves each process's ring acked_index (StateProvider::Acknowledged), which
// a restarted daemon resumes from.
//
// Buffering: unsent and unacknowledged batches share the budget
// `buffer_bytes`. Over it, unacknowledged batches go first (the engine has
// them in memory; only a crash of the engine before it recorded them would
// lose them: counted as batches_released_unacked), then the oldest unsent
// batches lose their records and windows (counted as batches_dropped /
// records_dropped, cumulative in every later Batch, and per process in the
// ring, XPU_LOSS_BUFFER) while their identity, signatures and exit flag are
// merged into the next batch. A batch written once to an engine that went
// away before acknowledging it may have been stored by that engine: when
// such a batch loses its records, they are not counted yet but named by
// ring position (ProcessBatch.unconfirmed_shed), and the engine that
// receives it says how many it already holds (BatchAck.shed_held); only
// the rest are counted lost, when that ack comes (records_unconfirmed
// meanwhile; an unacknowledged batch released for the budget leaves its
// runs' count to the ack that covers it). Reconnects back off exponentially (0.5 s → 10 s).
//
// Engine replicas (docs/deploy.md): `target` may list several engines,
// comma-separated ("a:7441,b:7441"). The client holds one stream at a time:
// to the first that answers, then, when it fails, to the next in the list
// (a full round of failures backs off). An engine replica that does not
// serve this daemon's job answers with a JobRedirect to the one that does;
// the client connects there next, and the unacknowledged batches go there
// like after any reconnect, so the loss accounting above is unchanged. A
// redirect to a plaintext non-loopback address is refused like such a
// --engine would be.
//
// Threads: a writer thread (connects, writes) and, per connection, a reader
// thread. Enqueue/stats/Stop are thread-safe.
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
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/collector.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

struct EngineClientOptions {
  // One engine, or several replicas comma-separated; gRPC's own address
  // lists ("ipv4:a,b", "ipv6:...") are one target.
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
  // Send records in the compact encoding (common/wire/record_codec.h) to an
  // engine whose HelloAck says it reads it; raw to any other. false: raw
  // always (--wire raw).
  bool compact_records = true;
};

struct EngineClientStats {
  bool connected = false;
  uint64_t connects = 0;  // successful handshakes
  uint64_t connect_failures = 0;
  uint64_t redirects = 0;  // JobRedirects followed
  std::string target;      // the engine of the current (or last) stream
  uint64_t batches_sent = 0;
  uint64_t batches_dropped = 0;
  uint64_t records_dropped = 0;
  // Shed from batches that an engine may have stored (see above), waiting
  // for an engine's word; and of those, the ones an engine held.
  uint64_t records_unconfirmed = 0;
  uint64_t records_shed_held = 0;
  uint64_t batches_buffered = 0;  // not yet written
  uint64_t bytes_buffered = 0;    // written or not, not yet acknowledged
  uint64_t batches_unacked = 0;   // written, not yet acknowledged
  uint64_t batches_acked = 0;
  uint64_t batches_resent = 0;    // written again after a reconnect
  uint64_t batches_released_unacked = 0;
  uint64_t records_rejected = 0;  // refused by the engine (BatchAck.rejected)
  uint64_t commands = 0;
  // Record blobs as written (after encoding), and the batches whose records
  // went in the compact form.
  uint64_t record_bytes_sent = 0;
  uint64_t batches_compact = 0;
};

// True for targets that stay on this host: unix: sockets, and hosts whose
// every resolved address is loopback (common/rpc/address.h).
bool IsLoopbackTarget(const std::string& target);
// The engines of --engine: comma-separated, blanks trimmed, empty parts
// dropped; a gRPC address list (ipv4:/ipv6: scheme) stays one target.
std::vector<std::string> SplitEngineTargets(const std::string& target);

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
  EngineClient(const EngineClientOptions& options, std::shared_ptr<grpc::ChannelCredentials> creds,
               bool plaintext, CommandHandler* handler, StateProvider* state);
  void Run();
  using Stream = grpc::ClientReaderWriter<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>;
  // One connection's lifetime; returns true if the handshake succeeded.
  bool RunConnection(const std::string& target);
  // The engine to try next: a redirect's, else the list's current one.
  std::string NextTarget(bool* from_redirect);  // needs mu_
  // Steps of a connection. ReadStream runs on its own thread until the
  // stream breaks: acks, and commands whose replies it queues.
  void ReadStream(Stream* stream);
  void QueueReply(xpu::v1::CommandReply reply);  // takes mu_, wakes the sender
  // Hello, then waits for the engine's ack; true when accepted.
  bool Handshake(Stream* stream, const std::string& target);
  // Identity and full signature tables (the engine may have restarted);
  // false when the write failed.
  bool Resync(Stream* stream);
  // Replies, batches and heartbeats until the stream breaks or Stop.
  void SendUntilBroken(Stream* stream);
  // Records lost for good, reported to the StateProvider outside mu_.
  struct Loss {
    uint64_t process_key;
    xpu_consumer_loss reason;
    uint64_t records;
  };
  // Releases unacknowledged batches, then drops the oldest unsent batches'
  // records, until the buffer fits. Needs mu_.
  void EnforceBudgetLocked(std::vector<Loss>* losses);
  void PrepareForSend(xpu::v1::Batch* batch);  // needs mu_
  // Encodes the records of a copy about to be written, when the engine reads
  // the compact form; returns the record bytes it will carry. Without mu_.
  uint64_t EncodeForSend(bool compact, xpu::v1::Batch* batch, bool* encoded) const;
  // BatchAck: forgets what it covers and settles it in the rings.
  void HandleAck(const xpu::v1::BatchAck& ack);
  // JobRedirect: the next connection goes to that replica.
  void HandleRedirect(const xpu::v1::JobRedirect& r);
  void ReportLosses(const std::vector<Loss>& losses);
  // Remembers the identity and signatures of the processes in `batch`.
  void NoteDefinitionsLocked(const xpu::v1::Batch& batch);

  const EngineClientOptions options_;
  const std::vector<std::string> targets_;  // SplitEngineTargets(options_.target)
  const bool plaintext_;                    // no TLS: only loopback unless insecure
  const std::shared_ptr<grpc::ChannelCredentials> creds_;
  CommandHandler* const handler_;
  StateProvider* const state_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  std::deque<std::pair<xpu::v1::Batch, size_t>> queue_;    // not yet written, with byte size
  std::deque<std::pair<xpu::v1::Batch, size_t>> unacked_;  // written, not acknowledged
  size_t queue_bytes_ = 0;                                 // both deques
  std::deque<xpu::v1::CommandReply> replies_;
  uint64_t next_seq_ = 1;
  // The newest batch_seq written to any stream: a batch at or below it may
  // be stored by an engine that did not acknowledge it.
  uint64_t last_written_seq_ = 0;
  // Unconfirmed shed records of unacknowledged batches released for the
  // budget (batch_seq -> process key -> records): the ack that covers the
  // batch still settles them.
  std::map<uint64_t, std::map<uint64_t, uint64_t>> released_shed_;
  // The batch whose copy is being written (0: none): in unacked_ already,
  // not released for the budget until the write returns.
  uint64_t in_flight_seq_ = 0;
  // Identity and every signature sent so far, per process with a batch
  // here (what a restarted engine must be told before those records).
  std::map<uint64_t, xpu::v1::ProcessBatch> definitions_;
  grpc::ClientContext* current_ctx_ = nullptr;
  size_t next_target_ = 0;  // index into targets_
  std::string redirect_;    // address of the last JobRedirect, until used
  // Handshake state of the current connection.
  bool acked_ = false;
  bool accepted_ = false;
  bool compact_ = false;  // the engine reads compact records (HelloAck)
  bool broken_ = false;
  EngineClientStats stats_;
  std::thread thread_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_ENGINE_CLIENT_H_
