// EngineClient: the life of one stream to one engine replica (hello,
// resync, writes, acknowledgements, commands). Routing and buffering are
// in engine_client.cc.
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "daemon/engine_client.h"
#include "daemon/engine_connection.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("engine_client");
  return logger;
}

}  // namespace

void EngineClient::Run(Conn* c) {
  uint64_t backoff_ms = options_.backoff_initial_ms;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_ || c->stop) return;
    }
    const bool handshook = RunConnection(c);
    std::unique_lock<std::mutex> lock(mu_);
    c->connected = false;
    Requeue(c);
    if (!running_ || c->stop) return;
    if (!handshook) ++stats_.connect_failures;
    if (!c->is_default) {
      // A redirect target that failed: its jobs go back to the configured
      // address at once.
      lock.unlock();
      OnReplicaFailed(c);
      return;
    }
    if (handshook) backoff_ms = options_.backoff_initial_ms;
    c->cv.wait_for(lock, std::chrono::milliseconds(backoff_ms),
                   [&] { return !running_ || c->stop; });
    if (!handshook) backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
  }
}

void EngineClient::Requeue(Conn* c) {
  // Written but not acknowledged: sent again on the next stream, first.
  for (auto it = c->sent.rbegin(); it != c->sent.rend(); ++it) {
    if (it->batch.processes_size() == 0) {
      c->bytes -= it->bytes;
      continue;
    }
    c->pending.push_front(std::move(*it));
  }
  c->sent.clear();
  c->written = 0;
  c->ack_base = 0;
}

bool EngineClient::RunConnection(Conn* c) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // A fresh channel per attempt: our backoff, not the channel's, paces retries.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(c->target, creds_, args);
  if (!c->is_default) {
    // A replica we were sent to may be gone: give up on it at its first
    // failed connection attempt (refused at once when its host is up), or
    // after 3 s at most.
    const uint64_t ms = std::min<uint64_t>(options_.ack_timeout_ms, 3000);
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
    grpc_connectivity_state st = channel->GetState(/*try_to_connect=*/true);
    while (st != GRPC_CHANNEL_READY) {
      if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) return false;
      if (!channel->WaitForStateChange(st, deadline)) return false;
      st = channel->GetState(/*try_to_connect=*/true);
    }
  }
  auto stub = xpu::v1::Ingest::NewStub(channel);
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_ || c->stop) return false;
    c->ctx = &ctx;
    c->acked = c->accepted = c->broken = false;
    c->acks = false;
    c->written = c->ack_base = 0;
  }
  auto stream = stub->Stream(&ctx);
  std::thread reader([&] { ReadStream(c, stream.get()); });

  bool handshook = false;
  auto finish = [&]() {
    ctx.TryCancel();
    reader.join();
    const grpc::Status st = stream->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    c->ctx = nullptr;
    if (!st.ok() && running_ && !c->stop) {
      Log()->warn("engine stream to {} ended: {} {}", c->target, static_cast<int>(st.error_code()),
                  st.error_message());
    }
    return handshook;
  };
  if (!Handshake(c, stream.get())) return finish();
  handshook = true;
  Log()->info("connected to engine {}", c->target);
  if (!Resync(c, stream.get())) return finish();
  SendUntilBroken(c, stream.get());
  return finish();
}

void EngineClient::QueueReply(Conn* c, xpu::v1::CommandReply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.commands;
  c->replies.push_back(std::move(reply));
  c->cv.notify_all();
}

void EngineClient::OnAck(Conn* c, uint64_t batches) {
  while (c->ack_base < batches && !c->sent.empty()) {
    c->bytes -= c->sent.front().bytes;
    c->sent.pop_front();
    ++c->ack_base;
  }
}

void EngineClient::ReadStream(Conn* c, Stream* stream) {
  xpu::v1::EngineMessage msg;
  while (stream->Read(&msg)) {
    if (msg.has_ack()) {
      std::lock_guard<std::mutex> lock(mu_);
      c->acked = true;
      c->accepted = msg.ack().accepted();
      c->acks = msg.ack().acks_batches();
      if (!c->accepted) Log()->error("engine refused this daemon: {}", msg.ack().reason());
    } else if (msg.has_batch_ack()) {
      std::lock_guard<std::mutex> lock(mu_);
      OnAck(c, msg.batch_ack().batches());
    } else if (msg.has_redirect()) {
      OnRedirect(c, msg.redirect());
    } else if (msg.has_command()) {
      // Long commands answer later (the reply joins the queue then); the
      // reader goes straight back to the stream.
      if (handler_ != nullptr &&
          handler_->HandleCommandAsync(
              msg.command(), [this, c](xpu::v1::CommandReply r) { QueueReply(c, std::move(r)); })) {
        continue;
      }
      xpu::v1::CommandReply reply;
      reply.set_command_id(msg.command().command_id());
      if (handler_ != nullptr) {
        handler_->HandleCommand(msg.command(), &reply);
      } else {
        reply.set_ok(false);
        reply.set_error("no command handler");
      }
      QueueReply(c, std::move(reply));
    }
    c->cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  c->broken = true;
  c->cv.notify_all();
}

bool EngineClient::Handshake(Conn* c, Stream* stream) {
  xpu::v1::DaemonMessage hello_msg;
  auto* hello = hello_msg.mutable_hello();
  hello->set_protocol_version(1);
  hello->set_daemon_id(options_.daemon_id);
  hello->set_host(options_.host);
  hello->set_pid(static_cast<uint32_t>(getpid()));
  hello->set_version(options_.version);
  hello->set_token(options_.token);
  hello->set_incarnation(incarnation_);
  if (!stream->Write(hello_msg)) return false;
  std::unique_lock<std::mutex> lock(mu_);
  c->cv.wait_for(lock, std::chrono::milliseconds(options_.ack_timeout_ms),
                 [&] { return c->acked || c->broken || !running_ || c->stop; });
  if (!c->acked || !c->accepted || !running_ || c->stop) return false;
  ++stats_.connects;
  c->connected = true;
  return true;
}

bool EngineClient::Resync(Conn* c, Stream* stream) {
  if (state_ == nullptr) return true;
  xpu::v1::DaemonMessage resync;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *resync.mutable_batch() = StateBatch("", c);
    PrepareForSend(resync.mutable_batch());
    // It counts among the stream's Batch messages.
    if (c->acks) c->sent.push_back(Item{});
    c->written++;
  }
  return stream->Write(resync);
}

void EngineClient::SendUntilBroken(Conn* c, Stream* stream) {
  auto last_write = std::chrono::steady_clock::now();
  for (;;) {
    xpu::v1::DaemonMessage out;
    bool have_batch = false;
    bool kept = false;  // acknowledged mode: the item moved to `sent` already
    {
      std::unique_lock<std::mutex> lock(mu_);
      c->cv.wait_until(lock, last_write + std::chrono::milliseconds(options_.heartbeat_ms), [&] {
        return !running_ || c->stop || c->broken || !c->replies.empty() || !c->pending.empty();
      });
      if (!running_ || c->stop || c->broken) break;
      if (!c->replies.empty()) {
        *out.mutable_reply() = std::move(c->replies.front());
        c->replies.pop_front();
      } else if (!c->pending.empty()) {
        *out.mutable_batch() = c->pending.front().batch;
        PrepareForSend(out.mutable_batch());
        have_batch = true;
        if (c->acks) {
          // Kept until the engine acknowledges it; a failed write breaks
          // the stream and Requeue puts it back in front.
          c->sent.push_back(std::move(c->pending.front()));
          c->pending.pop_front();
          kept = true;
        }
        c->written++;
      } else {
        out.mutable_heartbeat()->set_now_ns(RealtimeNs());
      }
    }
    if (!stream->Write(out)) break;
    last_write = std::chrono::steady_clock::now();
    if (have_batch) {
      std::lock_guard<std::mutex> lock(mu_);
      // Stays queued until written, so a failed write loses nothing. The
      // budget enforcer may have shrunk the front meanwhile; it is still the
      // same batch (same seq) unless it was folded or moved away.
      if (!kept && !c->pending.empty() &&
          c->pending.front().batch.batch_seq() == out.batch().batch_seq()) {
        c->bytes -= c->pending.front().bytes;
        c->pending.pop_front();
      }
      ++stats_.batches_sent;
    }
  }
}

}  // namespace xpu::daemon
