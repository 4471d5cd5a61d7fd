// Query.TimelineDump end to end inside one process: the real engine (gRPC
// server on an ephemeral port) and synthetic daemons speaking the real
// Ingest.Stream protocol; the dump is read through a real Query stub.
#include "engine/timeline/dump_fanout.h"

#include <gtest/gtest.h>

#include <set>

#include "common/timeline/rank_dump.h"
#include "common/timeline/synthetic_job.h"
#include "engine/testing/fake_daemon.h"
#include "engine/testing/synthetic_daemon.h"

namespace xpu::engine::timeline {
namespace {

using ::xpu::engine::testing::SyntheticDaemon;
using ::xpu::engine::testing::TestOptions;
using ::xpu::engine::testing::WaitFor;
using ::xpu::timeline::FromProcessBatch;
using ::xpu::timeline::kWorldComm;
using ::xpu::timeline::RankDump;
using ::xpu::timeline::SyntheticJob;
using ::xpu::timeline::SyntheticRank;

struct DumpResult {
  grpc::Status status;
  std::vector<xpu::v1::TimelineDumpProgress> progress;
  std::vector<xpu::v1::ProcessBatch> ranks;
  xpu::v1::TimelineDumpDone done;
  bool saw_done = false;
};

DumpResult Dump(int port, const xpu::v1::TimelineDumpRequest& req) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  auto stub = xpu::v1::Query::NewStub(xpu::engine::testing::TestChannel(
      port, std::nullopt, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->TimelineDump(&ctx, req);
  DumpResult r;
  xpu::v1::TimelineDumpMessage m;
  while (reader->Read(&m)) {
    if (m.has_progress()) r.progress.push_back(m.progress());
    if (m.has_rank()) r.ranks.push_back(m.rank());
    if (m.has_done()) {
      r.done = m.done();
      r.saw_done = true;
    }
  }
  r.status = reader->Finish();
  return r;
}

class DumpFanoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::Start(TestOptions());
    ASSERT_TRUE(e.ok()) << e.status();
    engine_ = std::move(*e);
    job_.ranks = 8;
    job_.ranks_per_host = 4;
    job_.steps = 6;
    job_.exited_rank = 6;
  }
  void StartDaemons(SyntheticDaemon::Mode second = SyntheticDaemon::Mode::kAnswer) {
    d0_ = std::make_unique<SyntheticDaemon>(engine_->port(), "d0", job_,
                                            std::vector<int>{0, 1, 2, 3});
    d1_ = std::make_unique<SyntheticDaemon>(engine_->port(), "d1", job_,
                                            std::vector<int>{4, 5, 6, 7}, second);
    ASSERT_TRUE(d0_->Start());
    ASSERT_TRUE(d1_->Start());
    ASSERT_TRUE(WaitFor([&] {
      auto j = engine_->registry().FindJob(job_.job);
      if (!j) return false;
      std::lock_guard<std::mutex> l(j->mu());
      return j->processes().size() == 8;
    }));
  }
  void TearDown() override {
    d0_.reset();
    d1_.reset();
    if (engine_) engine_->Shutdown();
  }
  std::unique_ptr<Engine> engine_;
  SyntheticJob job_;
  std::unique_ptr<SyntheticDaemon> d0_, d1_;
};

TEST_F(DumpFanoutTest, AllRanksIncludingExitedOne) {
  StartDaemons();
  xpu::v1::TimelineDumpRequest req;
  req.set_job(job_.job);
  DumpResult r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_TRUE(r.saw_done);
  ASSERT_EQ(r.ranks.size(), 8u);
  std::set<int> ranks;
  for (const auto& pb : r.ranks) {
    ranks.insert(pb.identity().rank());
    EXPECT_EQ(pb.exited(), pb.identity().rank() == 6);
    EXPECT_EQ(pb.records(),
              SyntheticRank(job_, pb.identity().rank()).records());  // packed, untouched
    EXPECT_TRUE(FromProcessBatch(pb).ok());
  }
  EXPECT_EQ(ranks.size(), 8u);
  EXPECT_EQ(r.done.ranks_total(), 8u);
  EXPECT_EQ(r.done.ranks_answered(), 8u);
  EXPECT_EQ(r.done.missing_size(), 0);
  // Progress: the start plus one per daemon, ending at 8/8.
  ASSERT_EQ(r.progress.size(), 3u);
  EXPECT_EQ(r.progress.front().ranks_answered(), 0u);
  EXPECT_EQ(r.progress.front().daemons_total(), 2u);
  EXPECT_EQ(r.progress.back().ranks_answered(), 8u);
  EXPECT_EQ(r.progress.back().daemons_answered(), 2u);
  EXPECT_EQ(d0_->commands(), 1u);
  EXPECT_EQ(d1_->commands(), 1u);
}

TEST_F(DumpFanoutTest, RankFilterAndLastNReachOnlyTheirDaemons) {
  StartDaemons();
  xpu::v1::TimelineDumpRequest req;
  req.set_job(job_.job);
  req.add_ranks(5);
  req.add_ranks(7);
  req.add_ranks(42);  // unknown
  req.set_last_n(10);
  DumpResult r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.ranks.size(), 2u);
  for (const auto& pb : r.ranks) EXPECT_EQ(pb.records().size(), 10 * sizeof(xpu_record_v1));
  EXPECT_EQ(d0_->commands(), 0u);
  EXPECT_EQ(d1_->commands(), 1u);
  EXPECT_EQ(d1_->last_ranks(), (std::vector<int32_t>{5, 7}));
  ASSERT_EQ(r.done.missing_size(), 1);
  EXPECT_EQ(r.done.missing(0).rank(), 42);
  EXPECT_NE(r.done.missing(0).reason().find("not known"), std::string::npos);
}

TEST_F(DumpFanoutTest, SilentDaemonIsReportedAfterTheDeadline) {
  StartDaemons(SyntheticDaemon::Mode::kSilent);
  xpu::v1::TimelineDumpRequest req;
  req.set_job(job_.job);
  req.set_deadline_ms(1500);
  req.set_no_engine_fallback(true);
  auto t0 = std::chrono::steady_clock::now();
  DumpResult r = Dump(engine_->port(), req);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.status.ok());
  EXPECT_GE(secs, 1.4);
  EXPECT_EQ(r.ranks.size(), 4u);
  EXPECT_EQ(r.done.ranks_answered(), 4u);
  ASSERT_EQ(r.done.missing_size(), 4);
  std::set<int> missing;
  for (const auto& m : r.done.missing()) {
    missing.insert(m.rank());
    EXPECT_EQ(m.daemon_id(), "d1");
    EXPECT_NE(m.reason().find("no answer within 1500 ms"), std::string::npos) << m.reason();
  }
  EXPECT_EQ(missing, (std::set<int>{4, 5, 6, 7}));

  // With the fallback (default), the engine serves d1's ranks from its own
  // ring: the 4 records each that the daemon's first batch carried.
  req.set_no_engine_fallback(false);
  r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.ranks.size(), 8u);
  EXPECT_EQ(r.done.missing_size(), 0);
  EXPECT_EQ(r.done.ranks_answered(), 8u);
  ASSERT_EQ(r.done.from_engine_size(), 4);
  EXPECT_NE(r.done.from_engine(0).reason().find("no answer within"), std::string::npos);
  for (const auto& pb : r.ranks) {
    const int rank = pb.identity().rank();
    if (rank < 4) continue;
    EXPECT_EQ(pb.records(),
              SyntheticRank(job_, rank).records().substr(0, 4 * sizeof(xpu_record_v1)));
    EXPECT_EQ(pb.signatures_size(), SyntheticRank(job_, rank).signatures_size());
    absl::StatusOr<RankDump> d = FromProcessBatch(pb);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->sigs.at(3).comm_id,
              kWorldComm);  // the AllReduce signature survived the round trip
  }
}

TEST_F(DumpFanoutTest, FailingAndDisconnectedDaemons) {
  StartDaemons(SyntheticDaemon::Mode::kError);
  xpu::v1::TimelineDumpRequest req;
  req.set_job(job_.job);
  req.set_no_engine_fallback(true);
  DumpResult r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.ranks.size(), 4u);
  ASSERT_EQ(r.done.missing_size(), 4);
  EXPECT_NE(r.done.missing(0).reason().find("synthetic failure"), std::string::npos);
  // d0 goes away: its ranks are reported, not waited for.
  d0_->Stop();
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& d : engine_->registry().Daemons()) {
      if (d.daemon_id == "d0") return !d.connected;
    }
    return false;
  }));
  r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.ranks.size(), 0u);
  ASSERT_EQ(r.done.missing_size(), 8);
  for (const auto& m : r.done.missing()) {
    if (m.daemon_id() == "d0")
      EXPECT_NE(m.reason().find("not connected"), std::string::npos) << m.reason();
  }
  // The engine's ring still has every rank.
  req.set_no_engine_fallback(false);
  r = Dump(engine_->port(), req);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.ranks.size(), 8u);
  EXPECT_EQ(r.done.from_engine_size(), 8);
  EXPECT_EQ(r.done.missing_size(), 0);
}

TEST_F(DumpFanoutTest, UnknownJob) {
  xpu::v1::TimelineDumpRequest req;
  req.set_job("nope");
  DumpResult r = Dump(engine_->port(), req);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace xpu::engine::timeline
