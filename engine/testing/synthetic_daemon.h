// SyntheticDaemon — a daemon double speaking the real Ingest.Stream protocol
// through a gRPC stub: it says hello, announces its ranks (identity and
// signatures, as a daemon's first batch does) and answers Command kind
// "history" with the synthetic job's records for the requested ranks,
// honouring `ranks` and `last_n` like daemon/collector.cc does. Used by the
// timeline fan-out tests and bench/timeline.
//
// Threading: one reader thread per daemon; Stop() (or the destructor) ends
// the stream and joins it.
#ifndef XPU_ENGINE_TESTING_SYNTHETIC_DAEMON_H_
#define XPU_ENGINE_TESTING_SYNTHETIC_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/timeline/synthetic_job.h"
#include "engine/state/batch_builder.h"
#include "engine/testing/fake_daemon.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.grpc.pb.h"

namespace xpu::engine::testing {

class SyntheticDaemon {
 public:
  enum class Mode { kAnswer, kSilent, kError };

  SyntheticDaemon(int port, std::string id, const ::xpu::timeline::SyntheticJob& job,
                  std::vector<int> ranks, Mode mode = Mode::kAnswer)
      : port_(port), id_(std::move(id)), mode_(mode) {
    for (int r : ranks) batches_[r] = ::xpu::timeline::SyntheticRank(job, r);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);
    args.SetMaxReceiveMessageSize(256 << 20);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = xpu::v1::Ingest::NewStub(channel_);
  }
  ~SyntheticDaemon() { Stop(); }

  // Hello + announcement; false when the engine refused.
  bool Start() {
    stream_ = stub_->Stream(&ctx_);
    if (!stream_->Write(MakeHello(id_, "host-" + id_, 1, LocalToken(port_)))) return false;
    xpu::v1::EngineMessage ack;
    if (!stream_->Read(&ack) || !ack.has_ack() || !ack.ack().accepted()) return false;
    xpu::v1::DaemonMessage m;
    xpu::v1::Batch* b = m.mutable_batch();
    b->set_batch_seq(0);
    for (const auto& [r, pb] : batches_) {
      xpu::v1::ProcessBatch* p = b->add_processes();
      *p->mutable_identity() = pb.identity();
      *p->mutable_signatures() = pb.signatures();
      p->set_process_key(pb.process_key());
      // A few records, so that the engine sees the rank as alive.
      p->set_records(
          pb.records().substr(0, std::min<size_t>(pb.records().size(), 4 * sizeof(xpu_record_v1))));
    }
    if (!stream_->Write(m)) return false;
    reader_ = std::thread([this] { ReadLoop(); });
    return true;
  }
  void Stop() {
    if (stopped_.exchange(true)) return;
    if (stream_) {
      {
        std::lock_guard<std::mutex> l(write_mu_);
        stream_->WritesDone();
      }
      ctx_.TryCancel();
    }
    if (reader_.joinable()) reader_.join();
    if (stream_) stream_->Finish();
  }
  size_t commands() const { return commands_.load(); }
  // Ranks named by the last history command (empty = all).
  std::vector<int32_t> last_ranks() {
    std::lock_guard<std::mutex> l(mu_);
    return last_ranks_;
  }

 private:
  void ReadLoop() {
    xpu::v1::EngineMessage m;
    while (stream_->Read(&m)) {
      if (!m.has_command()) continue;
      ++commands_;
      const xpu::v1::Command& c = m.command();
      {
        std::lock_guard<std::mutex> l(mu_);
        last_ranks_.assign(c.ranks().begin(), c.ranks().end());
      }
      if (mode_ == Mode::kSilent) continue;
      xpu::v1::DaemonMessage out;
      xpu::v1::CommandReply* reply = out.mutable_reply();
      reply->set_command_id(c.command_id());
      if (mode_ == Mode::kError || c.kind() != "history") {
        reply->set_ok(false);
        reply->set_error(mode_ == Mode::kError ? "synthetic failure"
                                               : "unknown command: " + c.kind());
      } else {
        reply->set_ok(true);
        for (const auto& [r, pb] : batches_) {
          if (c.ranks_size() > 0 &&
              std::find(c.ranks().begin(), c.ranks().end(), r) == c.ranks().end())
            continue;
          xpu::v1::ProcessBatch* p = reply->add_processes();
          *p->mutable_identity() = pb.identity();
          *p->mutable_signatures() = pb.signatures();
          p->set_process_key(pb.process_key());
          p->set_exited(pb.exited());
          const size_t n = pb.records().size() / sizeof(xpu_record_v1);
          const size_t keep = c.last_n() > 0 ? std::min<size_t>(n, c.last_n()) : n;
          p->set_records(pb.records().substr((n - keep) * sizeof(xpu_record_v1)));
        }
      }
      std::lock_guard<std::mutex> l(write_mu_);
      if (!stream_->Write(out)) break;
    }
  }

  int port_;
  std::string id_;
  Mode mode_;
  std::map<int, xpu::v1::ProcessBatch> batches_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xpu::v1::Ingest::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<xpu::v1::DaemonMessage, xpu::v1::EngineMessage>> stream_;
  std::mutex write_mu_;
  std::thread reader_;
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> commands_{0};
  std::mutex mu_;
  std::vector<int32_t> last_ranks_;
};

}  // namespace xpu::engine::testing

#endif  // XPU_ENGINE_TESTING_SYNTHETIC_DAEMON_H_
