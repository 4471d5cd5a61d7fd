// ingest_stream — one daemon's Ingest.Stream on gRPC's callback API, and
// the few worker threads that handle what every stream reads.
//
// Why: a cluster has a daemon per host, so a 100k-rank job is 12,500
// streams. gRPC's synchronous API would hold a thread per stream, each
// blocked in its own Read (docs/scale.md: 12,561 engine threads at 100k
// ranks, and 12 % more CPU per rank); the callback API reads them all on
// gRPC's few poller threads.
// What a stream reads is handled on IngestWorkers' threads, never on
// gRPC's: handling a batch takes its job's lock, which the window tick may
// hold for seconds, and may write to the history database.
//
// Order and flow: a stream reads its next message only once its handler
// has finished with the last one, so one stream's messages are handled in
// order, one at a time, and a daemon that sends faster than the engine
// handles waits in HTTP/2 flow control.
//
// Writes (hello and batch acknowledgements, commands, redirects) may come
// from any thread; they are queued and written one at a time. A daemon that
// does not read what the engine writes cannot make the engine hold more
// than `max_queued_writes` messages for it: the next write cancels its
// stream (Handler::OnWriteBacklog).
//
// Lifetime: gRPC owns the stream from IngestService::Stream until OnDone,
// where it deletes itself. Its handler's OnEnd runs before the stream
// finishes; after OnEnd nothing outside the stream may call Write (the
// handler holds the only way to it).
#ifndef XPU_ENGINE_INGEST_STREAM_H_
#define XPU_ENGINE_INGEST_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::engine {

// A fixed set of threads running posted tasks in the order posted.
class IngestWorkers {
 public:
  explicit IngestWorkers(int threads);
  // Runs what is still queued, then joins the threads.
  ~IngestWorkers();
  IngestWorkers(const IngestWorkers&) = delete;
  IngestWorkers& operator=(const IngestWorkers&) = delete;

  void Post(std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class IngestStream final
    : public grpc::ServerBidiReactor<xpu::v1::DaemonMessage, xpu::v1::EngineMessage> {
 public:
  // What a stream does with what it reads. Every call but OnCancelled runs
  // on a worker thread, one at a time for a stream.
  class Handler {
   public:
    virtual ~Handler() = default;
    // Each message, in order. A status other than OK ends the stream with
    // it, once the writes queued before it are written.
    virtual grpc::Status OnMessage(const xpu::v1::DaemonMessage& m) = 0;
    // Once, when the stream ends: after a message's status that was not OK
    // (`why`), or when the daemon closed it or it broke (`why` OK,
    // `cancelled()` tells which, as far as gRPC has said by then).
    virtual void OnEnd(const grpc::Status& why) = 0;
    // gRPC cancelled the call (the daemon cancelled, the transport broke, a
    // message over the size limit, the engine shutting down). On a gRPC
    // thread; at most once; not after the stream cancelled itself for its
    // write backlog (OnWriteBacklog instead).
    virtual void OnCancelled() = 0;
    // Write found max_queued_writes messages queued: the stream is
    // cancelled. On the thread that called Write.
    virtual void OnWriteBacklog() = 0;
  };

  IngestStream(grpc::CallbackServerContext* ctx, IngestWorkers* workers, size_t max_queued_writes);

  // Sets the handler and reads the first message. Once, right after the
  // constructor.
  void Start(std::unique_ptr<Handler> handler);
  // Queues `m` for the daemon. False when the stream is ending or broken,
  // or its queue is full (then the stream is cancelled).
  bool Write(xpu::v1::EngineMessage m);

  grpc::CallbackServerContext* context() const { return ctx_; }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // grpc::ServerBidiReactor
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Handle();               // worker: the message in in_
  void End(grpc::Status why);  // worker: OnEnd, then Finish after the writes
  bool FinishWantedLocked();   // needs mu_: true when Finish is to be called now

  grpc::CallbackServerContext* const ctx_;
  IngestWorkers* const workers_;
  const size_t max_queued_writes_;
  std::unique_ptr<Handler> handler_;
  xpu::v1::DaemonMessage in_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> self_cancelled_{false};

  std::mutex mu_;
  std::deque<xpu::v1::EngineMessage> writes_;  // front: being written while writing_
  bool writing_ = false;
  bool write_failed_ = false;
  bool ending_ = false;    // End ran: Finish once the writes are done
  bool finished_ = false;  // Finish was called
  grpc::Status status_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_INGEST_STREAM_H_
