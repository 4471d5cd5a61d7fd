// Test helpers: a fake daemon speaking Ingest.Stream through a real gRPC
// stub, and an engine on ephemeral ports with a temporary database.
#ifndef XPU_ENGINE_TESTING_FAKE_DAEMON_H_
#define XPU_ENGINE_TESTING_FAKE_DAEMON_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/local_identity.h"
#include "common/rpc/token.h"
#include "engine/engine.h"
#include "engine/state/batch_builder.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::engine::testing {

inline std::string TempPath(const std::string& name) {
  static int counter = 0;
  std::string p = (std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                  std::string("/xpu_") + name + "_" + std::to_string(getpid()) + "_" +
                  std::to_string(counter++);
  std::remove(p.c_str());
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  return p;
}

inline EngineOptions TestOptions() {
  EngineOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_addr = "off";
  o.db = TempPath("engine.db");
  o.window_s = 3600;  // tests tick explicitly
  return o;
}

// The token an engine on this host gives this process's uid (its identity
// socket, docs/security.md); "" when it has none.
inline std::string LocalToken(int port) {
  absl::StatusOr<std::string> t = rpc::FetchLocalIdentity("127.0.0.1:" + std::to_string(port));
  return t.ok() ? *t : std::string();
}

// Adds `token` as the x-xpu-token metadata of every call, as the CLI does.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::string token) : token_(std::move(token)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA) &&
        !token_.empty()) {
      m->GetSendInitialMetadata()->insert({rpc::kTokenMetadataKey, token_});
    }
    m->Proceed();
  }

 private:
  std::string token_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(token_);
  }

 private:
  std::string token_;
};

// A plaintext channel to the engine on `port` whose calls carry `token`
// (default: this process's local identity, as the CLI would).
inline std::shared_ptr<grpc::Channel> TestChannel(
    int port, std::optional<std::string> token = std::nullopt,
    const grpc::ChannelArguments& args = grpc::ChannelArguments()) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> f;
  f.push_back(std::make_unique<TokenInterceptorFactory>(token ? *token : LocalToken(port)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args,
      std::move(f));
}

class FakeDaemon {
 public:
  FakeDaemon(int port, std::string daemon_id) : port_(port), id_(std::move(daemon_id)) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = xpu::v1::Ingest::NewStub(channel_);
    stream_ = stub_->Stream(&ctx_);
  }
  // Sends a hello and reads the ack; false when the engine closed instead.
  // Without `token`, the local identity of this process's uid.
  bool Hello(uint32_t version = 1, std::optional<std::string> token = std::nullopt) {
    const std::string t = token ? *token : LocalToken(port_);
    if (!stream_->Write(MakeHello(id_, "host-" + id_, version, t))) return false;
    xpu::v1::EngineMessage ack;
    if (!stream_->Read(&ack) || !ack.has_ack()) return false;
    ack_ = ack.ack();
    return ack_.accepted();
  }
  // The engine's answer to the last Hello.
  const xpu::v1::HelloAck& ack() const { return ack_; }
  bool Send(const xpu::v1::Batch& b) {
    xpu::v1::DaemonMessage m;
    *m.mutable_batch() = b;
    return stream_->Write(m);
  }
  bool Send(const xpu::v1::DaemonMessage& m) { return stream_->Write(m); }
  bool Read(xpu::v1::EngineMessage* m) { return stream_->Read(m); }
  grpc::Status Finish() {
    stream_->WritesDone();
    xpu::v1::EngineMessage drain;
    while (stream_->Read(&drain)) {
    }
    return stream_->Finish();
  }
  // Ends the stream after the engine closed it (no WritesDone needed).
  grpc::Status FinishAfterClose() {
    xpu::v1::EngineMessage drain;
    while (stream_->Read(&drain)) {
    }
    return stream_->Finish();
  }
  grpc::ClientContext& context() { return ctx_; }

 private:
  int port_;
  std::string id_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xpu::v1::Ingest::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>> stream_;
  xpu::v1::HelloAck ack_;
};

// A batch for one rank: one GEMM signature (id 1) and n GEMM records.
inline xpu::v1::Batch RankBatch(const std::string& job, int rank, size_t n, bool with_sigs,
                                uint64_t seq = 1) {
  xpu::v1::Batch b;
  b.set_batch_seq(seq);
  xpu::v1::ProcessBatch* pb = b.add_processes();
  SetIdentity(pb, job, rank, "host" + std::to_string(rank / 8), 1000 + rank);
  if (with_sigs) *pb->add_signatures() = MakeGemmSignature(1, 1024, 1024, 1024);
  std::vector<xpu_record_v1> recs;
  for (size_t i = 0; i < n; ++i)
    recs.push_back(MakeRecord(1, 1000000 + i * 1000, 500, static_cast<uint32_t>(i)));
  AppendRecords(pb, recs);
  return b;
}

// Polls `pred` for up to `timeout`; loaded machines are slow, never fail
// early.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace xpu::engine::testing

#endif  // XPU_ENGINE_TESTING_FAKE_DAEMON_H_
