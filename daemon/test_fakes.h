// test_fakes.h — the other ends of the daemon's two connections, for tests:
// a hook written from include/xpu/transport.h alone, and an in-process
// Ingest service (grpc::Server on 127.0.0.1) that records what arrives.
#ifndef XPU_DAEMON_TEST_FAKES_H_
#define XPU_DAEMON_TEST_FAKES_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "xpu/record.h"
#include "xpu/transport.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::daemon::testing {

// Polls `cond` until it holds or the timeout passes; generous for loaded CI.
inline bool WaitFor(const std::function<bool()>& cond, int timeout_ms = 30000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// A hook written from transport.h alone.
class FakeHook {
 public:
  explicit FakeHook(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{20, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~FakeHook() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }

  bool Send(const void* data, size_t len, const std::vector<int>& fds) {
    iovec iov{const_cast<void*>(data), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(1, fds.size())));
    if (!fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
    }
    return sendmsg(fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
  }
  bool SendHello(int ring_fd, uint64_t size, uint32_t version = XPU_TRANSPORT_VERSION) {
    xpu_hello_v1 h{};
    h.magic = XPU_HELLO_MAGIC;
    h.version = version;
    h.abi_version = XPU_RECORD_ABI_VERSION;
    h.ring_file_size = size;
    h.pid = getpid();
    return Send(&h, sizeof(h), ring_fd >= 0 ? std::vector<int>{ring_fd} : std::vector<int>{});
  }
  // Returns the ack status, or -1.
  int ReadAck() {
    xpu_hello_ack_v1 ack{};
    const ssize_t n = recv(fd_, &ack, sizeof(ack), 0);
    if (n != sizeof(ack) || ack.magic != XPU_HELLO_MAGIC) return -1;
    EXPECT_EQ(ack.daemon_pid, static_cast<uint32_t>(getpid()));
    return static_cast<int>(ack.status);
  }
  // True when the daemon closed the connection.
  bool ClosedByPeer() {
    char b;
    return recv(fd_, &b, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// An in-process Ingest service that records what arrives.
class FakeIngest final : public xpu::v1::Ingest::Service {
 public:
  grpc::Status Stream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<xpu::v1::EngineMessage, xpu::v1::DaemonMessage>* stream) override {
    xpu::v1::DaemonMessage m;
    if (!stream->Read(&m) || !m.has_hello())
      return grpc::Status(grpc::FAILED_PRECONDITION, "hello first");
    {
      std::lock_guard<std::mutex> lock(mu_);
      hellos_.push_back(m.hello());
      stream_ = stream;
    }
    xpu::v1::EngineMessage ack;
    ack.mutable_ack()->set_accepted(m.hello().token() == expected_token_);
    ack.mutable_ack()->set_engine_id("fake");
    ack.mutable_ack()->set_compact_records(compact_records_);
    stream->Write(ack);
    while (stream->Read(&m)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (m.has_batch() && !redirect_to_.empty()) {
        // Another engine replica serves the job: tell the daemon, end.
        xpu::v1::EngineMessage r;
        r.mutable_redirect()->set_job(m.batch().processes_size() > 0
                                          ? m.batch().processes(0).identity().job()
                                          : "");
        r.mutable_redirect()->set_replica_id("other");
        r.mutable_redirect()->set_address(redirect_to_);
        stream->Write(r);
        ++redirected_;
        stream_ = nullptr;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "served by another replica");
      }
      if (m.has_batch()) batches_.push_back(m.batch());
      if (m.has_batch()) {
        // Of the unconfirmed shed runs, the records below
        // held_below_[process key] are held; said in the next ack.
        for (const auto& pb : m.batch().processes()) {
          const uint64_t below = held_below_[pb.process_key()];
          for (const auto& r : pb.unconfirmed_shed()) {
            if (below > r.first_position())
              held_unsaid_[pb.process_key()] += std::min(r.records(), below - r.first_position());
          }
        }
      }
      if (m.has_batch() && ack_batches_) {
        xpu::v1::EngineMessage a;
        a.mutable_batch_ack()->set_batch_seq(m.batch().batch_seq());
        for (const auto& [key, held] : held_unsaid_) {
          xpu::v1::ShedHeld* h = a.mutable_batch_ack()->add_shed_held();
          h->set_process_key(key);
          h->set_records(held);
        }
        held_unsaid_.clear();
        stream->Write(a);
      }
      if (m.has_reply()) replies_.push_back(m.reply());
      if (m.has_heartbeat()) ++heartbeats_;
    }
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }
  bool SendCommand(const xpu::v1::Command& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stream_ == nullptr) return false;
    xpu::v1::EngineMessage m;
    *m.mutable_command() = c;
    return stream_->Write(m);
  }
  template <typename F>
  auto With(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f(*this);
  }
  std::string expected_token_ = "secret";
  std::string redirect_to_;  // non-empty: every batch gets a JobRedirect there
  // Whether the HelloAck says it reads compact records (an older engine does not).
  bool compact_records_ = false;
  // Acknowledge every batch (saying it holds the unconfirmed shed runs
  // below held_below_); an engine that never acknowledges otherwise.
  bool ack_batches_ = false;
  std::map<uint64_t, uint64_t> held_below_;
  std::map<uint64_t, uint64_t> held_unsaid_;  // held shed records of batches not yet acked
  int redirected_ = 0;
  std::vector<xpu::v1::DaemonHello> hellos_;
  std::vector<xpu::v1::Batch> batches_;
  std::vector<xpu::v1::CommandReply> replies_;
  int heartbeats_ = 0;

 private:
  std::mutex mu_;
  grpc::ServerReaderWriter<xpu::v1::EngineMessage, xpu::v1::DaemonMessage>* stream_ = nullptr;
};

class FakeEngine {
 public:
  // `setup` configures the service before it takes a stream.
  explicit FakeEngine(int port = 0, const std::function<void(FakeIngest&)>& setup = nullptr) {
    if (setup) setup(service);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(&service);
    b.SetMaxReceiveMessageSize(64 << 20);
    server_ = b.BuildAndStart();
  }
  ~FakeEngine() { Stop(); }
  void Stop() {
    if (server_)
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_.reset();
  }
  int port() const { return port_; }
  FakeIngest service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace xpu::daemon::testing

#endif  // XPU_DAEMON_TEST_FAKES_H_
