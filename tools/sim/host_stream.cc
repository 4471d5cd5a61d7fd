#include "tools/sim/host_stream.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace xpu::sim {

HostStream::HostStream(std::string daemon_id, std::string host, std::string token,
                       CommandHandler handler)
    : daemon_id_(std::move(daemon_id)),
      host_(std::move(host)),
      token_(std::move(token)),
      handler_(std::move(handler)) {}

void HostStream::Start(xpu::v1::Ingest::Stub* stub) {
  stub->async()->Stream(&ctx_, this);
  xpu::v1::DaemonMessage hello;
  xpu::v1::DaemonHello* h = hello.mutable_hello();
  h->set_protocol_version(1);
  h->set_daemon_id(daemon_id_);
  h->set_host(host_);
  h->set_pid(static_cast<uint32_t>(getpid()));
  h->set_version("xpu-sim");
  h->set_token(token_);
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_front(Queued{std::move(hello), 0});
    WriteNextLocked();
  }
  StartRead(&in_);
  StartCall();
}

void HostStream::Enqueue(xpu::v1::DaemonMessage m, uint64_t records) {
  std::lock_guard<std::mutex> l(mu_);
  if (done_ || closing_) {
    records_dropped_ += records;
    return;
  }
  queue_.push_back(Queued{std::move(m), records});
  WriteNextLocked();
}

void HostStream::WriteNextLocked() {
  if (write_in_flight_ || queue_.empty() || done_) return;
  writing_ = std::move(queue_.front());
  queue_.pop_front();
  write_in_flight_ = true;
  StartWrite(&writing_.msg);
}

void HostStream::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> l(mu_);
  write_in_flight_ = false;
  if (ok) {
    bytes_sent_ += writing_.msg.ByteSizeLong();
    ++messages_sent_;
    records_sent_ += writing_.records;
  } else {
    records_dropped_ += writing_.records;
    for (const Queued& q : queue_) records_dropped_ += q.records;
    queue_.clear();
    if (error_.empty()) error_ = "write failed (stream closed)";
  }
  writing_ = Queued{};
  if (ok) WriteNextLocked();
  if (!write_in_flight_ && queue_.empty() && closing_ && !done_) StartWritesDone();
  cv_.notify_all();
}

void HostStream::OnReadDone(bool ok) {
  if (!ok) return;  // end of stream; OnDone follows
  if (in_.has_ack()) {
    std::lock_guard<std::mutex> l(mu_);
    (in_.ack().accepted() ? accepted_ : refused_) = true;
    compact_records_ = in_.ack().compact_records();
    if (!in_.ack().accepted()) error_ = absl::StrCat("engine refused: ", in_.ack().reason());
    cv_.notify_all();
  } else if (in_.has_command()) {
    ++commands_;
    xpu::v1::DaemonMessage out;
    *out.mutable_reply() = handler_(in_.command());
    Enqueue(std::move(out));
  }
  StartRead(&in_);
}

void HostStream::OnWritesDoneDone(bool /*ok*/) {}

void HostStream::OnDone(const grpc::Status& s) {
  std::lock_guard<std::mutex> l(mu_);
  done_ = true;
  status_ = s;
  if (!s.ok() && error_.empty()) {
    error_ = absl::StrCat("stream ended: ", s.error_message(), " (code ", s.error_code(), ")");
  }
  for (const Queued& q : queue_) records_dropped_ += q.records;
  queue_.clear();
  cv_.notify_all();
}

bool HostStream::WaitAccepted(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_until(l, deadline, [&] { return accepted_ || refused_ || done_; });
  return accepted_ && !done_;
}

bool HostStream::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_until(l, deadline, [&] { return done_ || (!write_in_flight_ && queue_.empty()); });
}

grpc::Status HostStream::Finish(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!done_) {
      closing_ = true;
      if (!write_in_flight_ && queue_.empty()) StartWritesDone();
    }
  }
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_until(l, deadline, [&] { return done_; })) {
    l.unlock();
    ctx_.TryCancel();
    l.lock();
    cv_.wait(l, [&] { return done_; });
  }
  return status_;
}

bool HostStream::failed() const {
  std::lock_guard<std::mutex> l(mu_);
  return done_ || refused_;
}

std::string HostStream::error() const {
  std::lock_guard<std::mutex> l(mu_);
  return error_;
}

}  // namespace xpu::sim
