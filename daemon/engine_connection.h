// engine_connection.h — internal to EngineClient (engine_client.h): the
// state of one stream to one engine replica. Every field is guarded by the
// client's mutex; the stream's writer thread is `thread`.
//
// Items: `pending` are queued and not yet written on the current stream;
// `sent` were written on it (resync included, as an empty item) and wait
// for the engine's BatchAck, which counts Batch messages since the hello,
// so an item leaves `sent` only from the front and a job that moves away
// leaves an empty item behind. Without acknowledgements `sent` stays empty.
#ifndef XPU_DAEMON_ENGINE_CONNECTION_H_
#define XPU_DAEMON_ENGINE_CONNECTION_H_

#include <condition_variable>
#include <deque>
#include <string>
#include <thread>

#include "daemon/engine_client.h"

namespace xpu::daemon {

struct EngineClient::Conn {
  Conn(std::string t, bool d) : target(std::move(t)), is_default(d) {}

  const std::string target;
  const bool is_default;  // the configured address; others are redirect targets
  std::deque<Item> pending;
  std::deque<Item> sent;
  size_t bytes = 0;  // of pending and sent
  std::deque<xpu::v1::CommandReply> replies;
  std::condition_variable cv;  // wakes the writer
  bool stop = false;
  grpc::ClientContext* ctx = nullptr;  // of the current stream
  // The current stream.
  bool acked = false;     // HelloAck received
  bool accepted = false;  // ... and it accepted us
  bool broken = false;    // the reader saw the stream end
  bool connected = false;
  bool acks = false;      // the engine sends BatchAck
  uint64_t written = 0;   // Batch messages written since the hello
  uint64_t ack_base = 0;  // of those, acknowledged
  std::thread thread;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_ENGINE_CONNECTION_H_
