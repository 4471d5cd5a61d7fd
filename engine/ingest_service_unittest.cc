// Ingest + Query through the real gRPC server, with a fake daemon client.
#include "engine/ingest_service.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <utility>

#include "common/rpc/token.h"
#include "common/wire/record_codec.h"
#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"

namespace xpu::engine {
namespace {

using testing::FakeDaemon;
using testing::RankBatch;
using testing::TestOptions;
using testing::WaitFor;

class IngestTest : public ::testing::Test {
 protected:
  void StartEngine(EngineOptions o = TestOptions()) {
    auto e = Engine::Start(o);
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    auto ch = xpu::engine::testing::TestChannel(engine_->port());
    query_ = xpu::v1::Query::NewStub(ch);
  }
  uint64_t RankRecords(const std::string& job, const std::string& key) {
    auto j = engine_->registry().FindJob(job);
    if (!j) return 0;
    std::lock_guard<std::mutex> l(j->mu());
    auto it = j->processes().find(key);
    return it == j->processes().end() ? 0 : it->second->records;
  }
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<xpu::v1::Query::Stub> query_;
};

TEST_F(IngestTest, AcceptsBatchesAndAnswersQueries) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(d.Send(RankBatch("job1", 0, 100, true, 1)));
  ASSERT_TRUE(d.Send(RankBatch("job1", 1, 50, true, 2)));
  ASSERT_TRUE(d.Send(RankBatch("job1", 0, 10, false, 3)));  // signatures sent once
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return RankRecords("job1", "rank:0") == 110; }));
  EXPECT_EQ(RankRecords("job1", "rank:1"), 50u);

  grpc::ClientContext c1;
  xpu::v1::RanksRequest rreq;
  rreq.set_job("job1");
  xpu::v1::RanksReply ranks;
  const grpc::Status st = query_->Ranks(&c1, rreq, &ranks);
  ASSERT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  ASSERT_EQ(ranks.ranks_size(), 2);
  EXPECT_EQ(ranks.ranks(0).rank(), 0);
  EXPECT_EQ(ranks.ranks(0).records(), 110u);
  EXPECT_EQ(ranks.ranks(0).signatures(), 1u);
  EXPECT_EQ(ranks.ranks(1).records(), 50u);
  EXPECT_EQ(ranks.ranks(1).liveness(), "alive");

  grpc::ClientContext c2;
  xpu::v1::StatusReply status;
  ASSERT_TRUE(query_->Status(&c2, xpu::v1::StatusRequest(), &status).ok());
  ASSERT_EQ(status.daemons_size(), 1);
  EXPECT_EQ(status.daemons(0).daemon_id(), "d1");
  EXPECT_EQ(status.daemons(0).batches(), 3u);
  EXPECT_EQ(status.records_total(), 160u);
  ASSERT_EQ(status.jobs_size(), 1);
  EXPECT_EQ(status.jobs(0).records(), 160u);

  grpc::ClientContext c3;
  rreq.set_job("nope");
  EXPECT_EQ(query_->Ranks(&c3, rreq, &ranks).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(IngestTest, WrongProtocolVersionIsRejected) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  EXPECT_FALSE(d.Hello(2));
  grpc::Status st = d.FinishAfterClose();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("protocol_version 2"), std::string::npos) << st.error_message();
  EXPECT_EQ(engine_->metrics().Rejected("protocol_version"), 1);
}

TEST_F(IngestTest, FirstMessageMustBeHello) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Send(RankBatch("j", 0, 1, true)));
  grpc::Status st = d.FinishAfterClose();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(IngestTest, BadBlobRejectsWholeBatchAndClosesStream) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  xpu::v1::Batch b = RankBatch("job1", 0, 10, true, 7);
  xpu::v1::Batch bad = RankBatch("job1", 1, 10, true, 7);
  bad.mutable_processes(0)->mutable_records()->append("xyz");
  *b.add_processes() = bad.processes(0);
  ASSERT_TRUE(d.Send(b));
  grpc::Status st = d.FinishAfterClose();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("batch 7"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("not a multiple of 32"), std::string::npos);
  EXPECT_EQ(engine_->metrics().Rejected("record_blob_size"), 1);
  EXPECT_EQ(RankRecords("job1", "rank:0"), 0u) << "nothing of a rejected batch is applied";
}

TEST_F(IngestTest, UnknownSigIdsAreSkippedAndCounted) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  xpu::v1::Batch b = RankBatch("job1", 0, 10, true);
  AppendRecords(b.mutable_processes(0), {MakeRecord(5, 1, 1, 1), MakeRecord(6, 1, 1, 1)});
  ASSERT_TRUE(d.Send(b));
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return RankRecords("job1", "rank:0") == 10; }));
  std::string text = engine_->metrics().Render();
  EXPECT_NE(text.find("xpu_ingest_records_skipped_total{reason=\"unknown_sig\",xpu_job=\"job1\","
                      "xpu_job_name=\"\"} 2"),
            std::string::npos)
      << text;
}

TEST_F(IngestTest, TokenRequiredWhenConfigured) {
  EngineOptions o = TestOptions();
  o.token_file = testing::TempPath("token");
  std::ofstream(o.token_file) << "s3cret\n";
  StartEngine(o);
  {
    FakeDaemon d(engine_->port(), "d1");
    EXPECT_FALSE(d.Hello(1, "wrong"));
    EXPECT_EQ(d.FinishAfterClose().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(engine_->metrics().Rejected("token"), 1);
  }
  {
    FakeDaemon d(engine_->port(), "d2");
    EXPECT_TRUE(d.Hello(1, "s3cret"));
    EXPECT_TRUE(d.Finish().ok());
  }
  // Without the local identity, as a caller on another host.
  auto query = xpu::v1::Query::NewStub(testing::TestChannel(engine_->port(), std::string()));
  grpc::ClientContext c1;
  xpu::v1::StatusReply status;
  EXPECT_EQ(query->Status(&c1, xpu::v1::StatusRequest(), &status).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext c2;
  c2.AddMetadata(rpc::kTokenMetadataKey, "s3cret");
  EXPECT_TRUE(query->Status(&c2, xpu::v1::StatusRequest(), &status).ok());
}

// Query, HangQuery, ProfileQuery and History share one token check
// (common/rpc/token.h): no token or a wrong one (also one that is a prefix
// of the right one) is UNAUTHENTICATED on every service; the right one gets
// through to the service's own answer (here: no such job).
TEST_F(IngestTest, EveryQueryServiceChecksTheSameToken) {
  EngineOptions o = TestOptions();
  o.token_file = testing::TempPath("token");
  std::ofstream(o.token_file) << "s3cret\n";
  StartEngine(o);
  // Without the local identity, as a caller on another host.
  auto ch = testing::TestChannel(engine_->port(), std::string());
  auto query = xpu::v1::Query::NewStub(ch);
  auto hang = xpu::v1::HangQuery::NewStub(ch);
  auto profile = xpu::v1::ProfileQuery::NewStub(ch);
  auto history = xpu::v1::History::NewStub(ch);
  for (const char* token : {"", "wrong", "s3cre", "s3cret!"}) {
    auto call = [&](auto&& rpc) {
      grpc::ClientContext c;
      if (*token != '\0') c.AddMetadata(rpc::kTokenMetadataKey, token);
      return rpc(&c).error_code();
    };
    xpu::v1::StatusReply status;
    EXPECT_EQ(call([&](grpc::ClientContext* c) {
                return query->Status(c, xpu::v1::StatusRequest(), &status);
              }),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
    xpu::v1::HangRequest hreq;
    hreq.set_job("job1");
    xpu::v1::HangReply hrep;
    EXPECT_EQ(call([&](grpc::ClientContext* c) { return hang->Get(c, hreq, &hrep); }),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
    xpu::v1::ProfileRequest preq;
    preq.set_job("job1");
    xpu::v1::ProfileResult prep;
    EXPECT_EQ(call([&](grpc::ClientContext* c) { return profile->Latest(c, preq, &prep); }),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
    xpu::v1::CalibrationsReply crep;
    EXPECT_EQ(call([&](grpc::ClientContext* c) {
                return history->Calibrations(c, xpu::v1::CalibrationsRequest(), &crep);
              }),
              grpc::StatusCode::UNAUTHENTICATED)
        << token;
  }
  grpc::ClientContext c1, c2, c3, c4;
  for (grpc::ClientContext* c : {&c1, &c2, &c3, &c4})
    c->AddMetadata(rpc::kTokenMetadataKey, "s3cret");
  xpu::v1::StatusReply status;
  EXPECT_TRUE(query->Status(&c1, xpu::v1::StatusRequest(), &status).ok());
  xpu::v1::HangRequest hreq;
  hreq.set_job("job1");
  xpu::v1::HangReply hrep;
  // The service's own answer: no such job.
  EXPECT_EQ(hang->Get(&c2, hreq, &hrep).error_code(), grpc::StatusCode::NOT_FOUND);
  xpu::v1::ProfileRequest preq;
  preq.set_job("job1");
  xpu::v1::ProfileResult prep;
  EXPECT_EQ(profile->Latest(&c3, preq, &prep).error_code(), grpc::StatusCode::NOT_FOUND);
  xpu::v1::CalibrationsReply crep;
  EXPECT_TRUE(history->Calibrations(&c4, xpu::v1::CalibrationsRequest(), &crep).ok());
}

TEST_F(IngestTest, OversizedMessageIsRejectedAndCounted) {
  EngineOptions o = TestOptions();
  o.max_receive_bytes = 1 << 20;
  StartEngine(o);
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  d.Send(RankBatch("job1", 0, (2 << 20) / 32, true));  // 2 MiB of records
  grpc::Status st = d.FinishAfterClose();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(WaitFor([&] { return engine_->metrics().Rejected("stream_aborted") >= 1; }));
  EXPECT_EQ(RankRecords("job1", "rank:0"), 0u);
}

TEST_F(IngestTest, CommandsRoundTripToTheDaemon) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(WaitFor([&] { return engine_->registry().DaemonsConnected() == 1; }));
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.set_job("job1");
  CommandFuture fut = engine_->SendCommand("d1", cmd);
  xpu::v1::EngineMessage m;
  ASSERT_TRUE(d.Read(&m));
  ASSERT_TRUE(m.has_command());
  EXPECT_EQ(m.command().kind(), "history");
  EXPECT_NE(m.command().command_id(), 0u);
  xpu::v1::DaemonMessage reply;
  reply.mutable_reply()->set_command_id(m.command().command_id());
  reply.mutable_reply()->set_ok(true);
  reply.mutable_reply()->set_payload("dump");
  ASSERT_TRUE(d.Send(reply));
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  absl::StatusOr<xpu::v1::CommandReply> r = fut.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->payload(), "dump");

  // A command pending when the daemon goes away fails instead of hanging.
  CommandFuture lost = engine_->SendCommand("d1", cmd);
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_EQ(lost.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(lost.get().status().code(), absl::StatusCode::kUnavailable);

  EXPECT_EQ(engine_->SendCommand("nobody", cmd).get().status().code(), absl::StatusCode::kNotFound);
}

// Many daemons, one ingest worker: every stream's batches are applied and
// acknowledged in order, none waiting for a thread of its own.
TEST_F(IngestTest, ManyDaemonsShareOneIngestWorker) {
  EngineOptions o = TestOptions();
  o.ingest_threads = 1;
  StartEngine(o);
  constexpr int kDaemons = 64;
  std::vector<std::unique_ptr<FakeDaemon>> daemons;
  for (int i = 0; i < kDaemons; ++i) {
    daemons.push_back(std::make_unique<FakeDaemon>(engine_->port(), "d" + std::to_string(i)));
    ASSERT_TRUE(daemons.back()->Hello());
  }
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    for (int i = 0; i < kDaemons; ++i)
      ASSERT_TRUE(daemons[i]->Send(RankBatch("job1", i, 10 * seq, seq == 1, seq)));
  }
  for (int i = 0; i < kDaemons; ++i) {
    const std::string key = "rank:" + std::to_string(i);
    ASSERT_TRUE(WaitFor([&] { return RankRecords("job1", key) == 60; })) << key;
    // Acknowledgements of one stream may coalesce; they come in order.
    uint64_t acked = 0;
    while (acked < 3) {
      xpu::v1::EngineMessage m;
      ASSERT_TRUE(daemons[i]->Read(&m)) << key;
      ASSERT_TRUE(m.has_batch_ack());
      EXPECT_GT(m.batch_ack().batch_seq(), acked);
      acked = m.batch_ack().batch_seq();
    }
    EXPECT_EQ(acked, 3u);
  }
  EXPECT_EQ(engine_->registry().DaemonsConnected(), static_cast<size_t>(kDaemons));
  for (auto& d : daemons) EXPECT_TRUE(d->Finish().ok());
  EXPECT_TRUE(WaitFor([&] { return engine_->registry().DaemonsConnected() == 0; }));
}

// A daemon that reads nothing the engine writes loses its stream once
// --max-queued-writes messages wait for it; the engine does not hold more.
TEST_F(IngestTest, ADaemonThatReadsNothingLosesItsStreamAtTheWriteCap) {
  EngineOptions o = TestOptions();
  o.max_queued_writes = 4;
  StartEngine(o);
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(WaitFor([&] { return engine_->registry().DaemonsConnected() == 1; }));
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.set_job(std::string(256 << 10, 'j'));  // 256 KiB: the transport's buffers fill soon
  std::vector<CommandFuture> sent;
  for (int i = 0; i < 1024 && engine_->metrics().Rejected("write_backlog") == 0; ++i)
    sent.push_back(engine_->SendCommand("d1", cmd));
  EXPECT_EQ(engine_->metrics().Rejected("write_backlog"), 1u);
  EXPECT_LT(sent.size(), 1024u);
  // Every command ends: refused at the cap, or failed when the stream ended.
  for (CommandFuture& f : sent) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    EXPECT_EQ(f.get().status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_TRUE(WaitFor([&] { return engine_->registry().DaemonsConnected() == 0; }));
  EXPECT_EQ(d.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(engine_->metrics().Rejected("stream_aborted"), 0u);  // counted once, as the backlog
}

TEST_F(IngestTest, UnansweredCommandExpires) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(WaitFor([&] { return engine_->registry().DaemonsConnected() == 1; }));
  xpu::v1::Command cmd;
  cmd.set_kind("stacks");
  cmd.set_deadline_ms(1);
  CommandFuture fut = engine_->SendCommand("d1", cmd);
  xpu::v1::EngineMessage m;
  ASSERT_TRUE(d.Read(&m));  // delivered, never answered
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  engine_->TickWindow();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(fut.get().status().code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(d.Finish().ok());
}

TEST_F(IngestTest, CollectiveBusBandwidthReachesMetrics) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  // 2 ranks, allreduce of 2^20 f32 (4 MiB); rank 1 starts 100 us late; both
  // end at 1100 us -> last-arrival time 1 ms; busbw = 4 MiB * 2*(1/2) / 1 ms.
  for (int rank = 0; rank < 2; ++rank) {
    xpu::v1::Batch b;
    xpu::v1::ProcessBatch* pb = b.add_processes();
    SetIdentity(pb, "jobC", rank, "h", 10 + rank);
    *pb->add_signatures() =
        MakeCollectiveSignature(3, XPU_OP_ALLREDUCE, 1 << 20, XPU_DT_F32, 99, rank, 2);
    const uint64_t start = rank == 0 ? 0 : 100000;
    AppendRecords(pb, {MakeRecord(3, start, static_cast<uint32_t>(1100000 - start), 1)});
    ASSERT_TRUE(d.Send(b));
  }
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return RankRecords("jobC", "rank:1") == 1; }));
  engine_->TickWindow();
  std::string text = engine_->metrics().Render();
  EXPECT_NE(text.find("xpu_collective_busbw_bytes_per_second{op=\"allreduce\",xpu_job=\"jobC\",xpu_"
                      "job_name=\"\"} 4194304000"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("xpu_ingest_records_total{xpu_job=\"jobC\",xpu_job_name=\"\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("xpu_job_ranks{state=\"alive\",xpu_job=\"jobC\",xpu_job_name=\"\"} 2"),
            std::string::npos)
      << text;
  // No collective completed in the next window: the series goes away
  // instead of showing a stale figure.
  engine_->TickWindow();
  EXPECT_EQ(engine_->metrics().Render().find("op=\"allreduce\""), std::string::npos);
}

// A job of more ranks than figures.gauge_max_ranks shows the last-record
// age of its oldest ranks only (2 x figures.standout_ranks), and the ranks
// that are no longer among them lose the series.
TEST_F(IngestTest, LargeJobsShowTheOldestRanksLastRecordAges) {
  const std::string config = ::testing::TempDir() + "/large_job_ages.conf";
  {
    std::ofstream f(config);
    f << "figures.gauge_max_ranks=2\nfigures.standout_ranks=1\n";
  }
  EngineOptions o = TestOptions();
  o.detector_config = config;
  StartEngine(o);
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  auto send = [&](int rank, uint64_t seq) {
    ASSERT_TRUE(d.Send(RankBatch("jobA", rank, 1, seq == 1, seq)));
    ASSERT_TRUE(WaitFor([&] { return RankRecords("jobA", "rank:" + std::to_string(rank)) >= 1; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  for (int rank = 0; rank < 4; ++rank) send(rank, 1);
  auto shown = [&] {
    std::set<std::string> ranks;
    const std::string text = engine_->metrics().Render();
    for (size_t at = text.find("xpu_rank_last_record_age_seconds{"); at != std::string::npos;
         at = text.find("xpu_rank_last_record_age_seconds{", at + 1)) {
      const size_t r = text.find("rank=\"", at);
      ranks.insert(text.substr(r + 6, text.find('"', r + 6) - r - 6));
    }
    return ranks;
  };
  engine_->TickWindow();
  EXPECT_EQ(shown(), (std::set<std::string>{"0", "1"}));
  send(0, 2);
  send(1, 2);
  engine_->TickWindow();
  EXPECT_EQ(shown(), (std::set<std::string>{"2", "3"}));
  ASSERT_TRUE(d.Finish().ok());
}

// The engine says it reads compact records and takes both forms on one
// stream; a compact blob that does not decode costs its sender those
// records, counted under their own loss reason (metrics, Ranks, Status),
// while the rest of the batch and the stream go on.
TEST_F(IngestTest, CompactRecordsAndUndecodableBlobs) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  EXPECT_TRUE(d.ack().compact_records());
  xpu::v1::Batch b = RankBatch("jobC", 0, 40, true, 1);
  ASSERT_TRUE(wire::CompactProcessBatchRecords(b.mutable_processes(0)));
  xpu::v1::Batch bad = RankBatch("jobC", 1, 30, true, 1);
  ASSERT_TRUE(wire::CompactProcessBatchRecords(bad.mutable_processes(0)));
  std::string* blob = bad.mutable_processes(0)->mutable_compact_records();
  blob->resize(blob->size() - 3);  // the last record cut short
  *b.add_processes() = bad.processes(0);
  ASSERT_TRUE(d.Send(b));
  ASSERT_TRUE(d.Send(RankBatch("jobC", 1, 5, false, 2)));  // raw, same stream
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return RankRecords("jobC", "rank:1") == 5; }));
  EXPECT_EQ(RankRecords("jobC", "rank:0"), 40u);
  EXPECT_EQ(engine_->metrics().Rejected("record_undecodable"), 1);
  const std::string text = engine_->metrics().Render();
  EXPECT_NE(text.find("xpu_records_dropped_total{reason=\"record_undecodable\",xpu_job=\"jobC\","
                      "xpu_job_name=\"\"} 30"),
            std::string::npos)
      << text;
  grpc::ClientContext c1;
  xpu::v1::RanksRequest rreq;
  rreq.set_job("jobC");
  xpu::v1::RanksReply ranks;
  ASSERT_TRUE(query_->Ranks(&c1, rreq, &ranks).ok());
  ASSERT_EQ(ranks.ranks_size(), 2);
  uint64_t lost = 0;
  for (const auto& l : ranks.ranks(1).lost())
    if (l.reason() == "record_undecodable") lost = l.records();
  EXPECT_EQ(lost, 30u);
  grpc::ClientContext c2;
  xpu::v1::StatusReply status;
  ASSERT_TRUE(query_->Status(&c2, xpu::v1::StatusRequest(), &status).ok());
  lost = 0;
  for (const auto& l : status.lost())
    if (l.reason() == "record_undecodable") lost = l.records();
  EXPECT_EQ(lost, 30u);
}

TEST_F(IngestTest, DropCountersBecomeDeltas) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  for (uint64_t lapped : {2u, 10u}) {  // cumulative counters, sent twice
    xpu::v1::Batch b = RankBatch("jobD", 0, 1, lapped == 2u);
    xpu::v1::ProcessCounters* c = b.mutable_processes(0)->mutable_counters();
    c->add_hook(5);  // XPU_CNT_DROPPED_FULL
    c->set_records_lapped(lapped);
    ASSERT_TRUE(d.Send(b));
  }
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return RankRecords("jobD", "rank:0") == 2; }));
  const std::string text = engine_->metrics().Render();
  EXPECT_NE(text.find("xpu_records_dropped_total{reason=\"ring_lapped\",xpu_job=\"jobD\",xpu_job_"
                      "name=\"\"} 10"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          "xpu_records_dropped_total{reason=\"ring_full\",xpu_job=\"jobD\",xpu_job_name=\"\"} 5"),
      std::string::npos)
      << text;
}

// A flood of well-formed processes costs its sender its cap, never the
// engine: processes beyond a cap are refused, by reason, and their records
// counted; the engine keeps serving and keeps what it admitted.
TEST_F(IngestTest, CapsRefuseAndCountTheExcess) {
  EngineOptions o = TestOptions();
  o.max_processes_per_stream = 6;
  o.max_ranks_per_job = 4;
  o.max_jobs = 2;
  StartEngine(o);
  FakeDaemon d(engine_->port(), "flood");
  ASSERT_TRUE(d.Hello());
  // job A: ranks 0..5, four admitted (ranks per job).
  for (int r = 0; r < 6; ++r) ASSERT_TRUE(d.Send(RankBatch("jobA", r, 10, true, r + 1)));
  // job B: two admitted before the stream's cap of six processes.
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(d.Send(RankBatch("jobB", r, 10, true, 10 + r)));
  // A third job: beyond the engine's job cap.
  ASSERT_TRUE(d.Send(RankBatch("jobC", 0, 10, true, 20)));
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return engine_->metrics().RejectedTotal() >= 5; }));
  EXPECT_EQ(engine_->metrics().Rejected("ranks_per_job"), 2);
  EXPECT_EQ(engine_->metrics().Rejected("processes_per_stream"), 2);
  EXPECT_EQ(engine_->metrics().Rejected("jobs"), 1);
  const std::string text = engine_->metrics().Render();
  EXPECT_NE(text.find("xpu_ingest_rejected_records_total{reason=\"ranks_per_job\"} 20"),
            std::string::npos)
      << text;
  auto a = engine_->registry().FindJob("jobA");
  ASSERT_NE(a, nullptr);
  {
    std::lock_guard<std::mutex> l(a->mu());
    EXPECT_EQ(a->processes().size(), 4u);
  }
  EXPECT_EQ(engine_->registry().FindJob("jobC"), nullptr);
  EXPECT_EQ(RankRecords("jobB", "rank:1"), 10u);
  EXPECT_EQ(RankRecords("jobB", "rank:2"), 0u);
}

// The job buffer counts what the rings hold, not their capacity: with room
// for less than one full ring, ranks holding a few records each are
// admitted (a job of 100k ranks once stopped at 32,768 of 64 GiB); once the
// rings really hold the budget, new processes are refused. Rings keep full
// chunks in the compact encoding, so the budget is reached here by records
// that do not compress (random times, durations and latencies).
TEST_F(IngestTest, JobBufferCountsWhatTheRingsHold) {
  EngineOptions o = TestOptions();
  o.ring_records = 65536;
  o.max_job_buffer_mb = 1;
  StartEngine(o);
  FakeDaemon d(engine_->port(), "d");
  ASSERT_TRUE(d.Hello());
  for (int r = 0; r < 8; ++r) ASSERT_TRUE(d.Send(RankBatch("jb", r, 10, true, r + 1)));
  // 65,536 records of the same op compress to a few bytes each: admitted
  // beside the others, far within the budget.
  ASSERT_TRUE(d.Send(RankBatch("jb", 8, 65536, true, 9)));
  xpu::v1::Batch noisy = RankBatch("jb", 10, 0, true, 10);
  std::mt19937_64 rng(3);
  std::vector<xpu_record_v1> recs;
  for (uint32_t i = 0; i < 60000; ++i) {
    xpu_record_v1 r = MakeRecord(1, rng() >> 2, static_cast<uint32_t>(rng()), i);
    r.issue_latency_ns = static_cast<int32_t>(rng());
    recs.push_back(r);
  }
  AppendRecords(noisy.mutable_processes(0), recs);  // over 1 MB of ring
  ASSERT_TRUE(d.Send(noisy));
  ASSERT_TRUE(d.Send(RankBatch("jb", 11, 10, true, 11)));  // over the budget
  ASSERT_TRUE(d.Finish().ok());
  ASSERT_TRUE(WaitFor([&] { return engine_->metrics().RejectedTotal() >= 1; }));
  EXPECT_EQ(engine_->metrics().Rejected("job_buffer"), 1);
  EXPECT_EQ(RankRecords("jb", "rank:7"), 10u);
  EXPECT_EQ(RankRecords("jb", "rank:8"), 65536u);
  EXPECT_EQ(RankRecords("jb", "rank:10"), 60000u);
  EXPECT_EQ(RankRecords("jb", "rank:11"), 0u);
}

// A detector of the window's view that feeds the job more records while it
// runs (once), and notes what each window's view held and whether the
// job's lock was free meanwhile.
class FeedWhileDetecting : public Detector {
 public:
  FeedWhileDetecting(std::shared_ptr<WindowViews> views, std::function<bool()> feed)
      : views_(std::move(views)), feed_(std::move(feed)) {}
  std::string_view name() const override { return "feed_while_detecting"; }
  bool ReadsOnlyTheView() const override { return true; }
  void OnWindow(const JobState& job, DiagnosisSink& /*sink*/) override {
    view_records.push_back(views_->Get(job).records);
    const bool free = job.mu().try_lock();
    if (free) job.mu().unlock();
    lock_free.push_back(free);
    if (feed_) fed = std::exchange(feed_, nullptr)();
  }
  std::vector<uint64_t> view_records;
  std::vector<bool> lock_free;
  bool fed = false;

 private:
  std::shared_ptr<WindowViews> views_;
  std::function<bool()> feed_;
};

TEST_F(IngestTest, RecordsKeepComingWhileTheViewsDetectorsRun) {
  StartEngine();
  FakeDaemon d(engine_->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(d.Send(RankBatch("jf", 0, 200, true, 1)));
  ASSERT_TRUE(WaitFor([&] { return RankRecords("jf", "rank:0") == 200; }));
  auto job = engine_->registry().FindJob("jf");
  ASSERT_TRUE(job);
  // The job's records as read without waiting for its lock (the probe runs
  // inside the tick: before the tick let go during such detectors, this
  // never saw the fed records).
  auto records_now = [&job]() -> uint64_t {
    if (!job->mu().try_lock()) return 0;
    const uint64_t n = job->processes().at("rank:0")->records;
    job->mu().unlock();
    return n;
  };
  auto probe = std::make_unique<FeedWhileDetecting>(engine_->views(), [&] {
    return d.Send(RankBatch("jf", 0, 300, false, 2)) &&
           WaitFor([&] { return records_now() == 500; }, std::chrono::seconds(5));
  });
  FeedWhileDetecting* p = probe.get();
  engine_->AddDetector(std::move(probe));
  engine_->TickWindow();
  EXPECT_TRUE(p->fed) << "a batch sent while the view's detectors ran was not applied";
  engine_->TickWindow();
  ASSERT_TRUE(d.Finish().ok());
  EXPECT_EQ(p->lock_free, std::vector<bool>({true, true}));
  // Every record fed during the first tick is in the second window's view
  // (more than a ring keeps between windows: none was cut).
  EXPECT_EQ(p->view_records, std::vector<uint64_t>({200, 300}));
}

TEST_F(IngestTest, RefusesNonLoopbackWithoutProtection) {
  EngineOptions o = TestOptions();
  o.listen = "0.0.0.0:0";
  auto e = Engine::Start(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("refusing to listen"), std::string::npos);
}

TEST_F(IngestTest, WindowTickDiagnosesSilentRankAndPersists) {
  std::atomic<uint64_t> now{5000ull * 1000000000ull};
  EngineOptions o = TestOptions();
  o.silent_after_s = 30;
  {
    auto e = Engine::Start(o, [&] { return now.load(); });
    ASSERT_TRUE(e.ok()) << e.status();
    FakeDaemon d((*e)->port(), "d1");
    ASSERT_TRUE(d.Hello());
    ASSERT_TRUE(d.Send(RankBatch("jobS", 0, 5, true)));
    ASSERT_TRUE(d.Send(RankBatch("jobS", 1, 5, true)));
    ASSERT_TRUE(d.Finish().ok());
    ASSERT_TRUE(WaitFor([&] {
      return (*e)->registry().JobSummaries(false).size() == 1 &&
             (*e)->registry().JobSummaries(false)[0].records == 10;
    }));
    // A job's analysis is dated by the tick that finished it.
    EXPECT_EQ((*e)->registry().JobSummaries(false)[0].analysed_until_ns, 0u);
    EXPECT_TRUE((*e)->TickWindow().empty());
    EXPECT_EQ((*e)->registry().JobSummaries(false)[0].analysed_until_ns, now.load());
    now += 60ull * 1000000000ull;
    std::vector<Diagnosis> diags = (*e)->TickWindow();
    EXPECT_EQ((*e)->registry().JobSummaries(false)[0].analysed_until_ns, now.load());
    ASSERT_EQ(diags.size(), 1u);
    EXPECT_EQ(diags[0].kind, "rank_silent");
    EXPECT_EQ(diags[0].ranks.size(), 2u);
    EXPECT_EQ(diags[0].severity, Severity::kCritical);
    ASSERT_TRUE((*e)->store().Flush().ok());
  }
  // Restart on the same database: the job is history now.
  auto e2 = Engine::Start(o, [&] { return now.load(); });
  ASSERT_TRUE(e2.ok()) << e2.status();
  auto all = (*e2)->registry().JobSummaries(true);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].job, "jobS");
  EXPECT_EQ(all[0].records, 10u);
  EXPECT_EQ(all[0].state, "finished");
  EXPECT_TRUE((*e2)->registry().JobSummaries(false).empty());
  auto diags = (*e2)->store().LoadDiagnoses("jobS");
  ASSERT_TRUE(diags.ok());
  EXPECT_EQ(diags->size(), 1u);
}

}  // namespace
}  // namespace xpu::engine
