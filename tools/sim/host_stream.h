// tools/sim/host_stream.h — one simulated daemon: the Ingest.Stream of one
// host, through gRPC's callback API so that tens of thousands of hosts need
// no thread each. It sends the hello, then whatever is queued (batches,
// command replies) one message at a time, and hands every command the
// engine sends to a handler whose reply it queues.
//
// Accounting: bytes are the serialized size of each DaemonMessage written
// (protobuf, without HTTP/2 framing); a batch whose write fails is counted
// as dropped with its records.
//
// Threading: Enqueue, counters and WaitIdle are thread-safe; the reactor
// callbacks run on gRPC's threads. The object must outlive its call:
// Finish() waits for OnDone.
#ifndef XPU_TOOLS_SIM_HOST_STREAM_H_
#define XPU_TOOLS_SIM_HOST_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::sim {

using CommandHandler = std::function<xpu::v1::CommandReply(const xpu::v1::Command&)>;

class HostStream : public grpc::ClientBidiReactor<xpu::v1::DaemonMessage, xpu::v1::EngineMessage> {
 public:
  HostStream(std::string daemon_id, std::string host, std::string token, CommandHandler handler);

  // Starts the call on `stub` and writes the hello.
  void Start(xpu::v1::Ingest::Stub* stub);
  // Queues a message; `records` is what a batch carries (for accounting).
  void Enqueue(xpu::v1::DaemonMessage m, uint64_t records = 0);
  // Waits until the engine accepted the hello (or refused, or the deadline).
  bool WaitAccepted(std::chrono::steady_clock::time_point deadline);
  // Waits until every queued message was written (or the stream failed).
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);
  // Half-closes after the queue drained and waits for the end of the call.
  grpc::Status Finish(std::chrono::steady_clock::time_point deadline);

  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  uint64_t messages_sent() const { return messages_sent_.load(); }
  uint64_t records_sent() const { return records_sent_.load(); }
  uint64_t records_dropped() const { return records_dropped_.load(); }
  uint64_t commands() const { return commands_.load(); }
  // The engine's HelloAck said it reads compact records.
  bool compact_records() const { return compact_records_.load(); }
  bool failed() const;
  std::string error() const;

  // grpc::ClientBidiReactor
  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& s) override;

 private:
  struct Queued {
    xpu::v1::DaemonMessage msg;
    uint64_t records = 0;
  };
  void WriteNextLocked();  // needs mu_

  const std::string daemon_id_, host_, token_;
  CommandHandler handler_;
  grpc::ClientContext ctx_;
  xpu::v1::EngineMessage in_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  Queued writing_;
  bool write_in_flight_ = false;
  bool accepted_ = false, refused_ = false;
  bool closing_ = false, done_ = false;
  grpc::Status status_;
  std::string error_;

  std::atomic<uint64_t> bytes_sent_{0}, messages_sent_{0}, records_sent_{0};
  std::atomic<uint64_t> records_dropped_{0}, commands_{0};
  std::atomic<bool> compact_records_{false};
};

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_HOST_STREAM_H_
