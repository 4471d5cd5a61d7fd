// Engine replicas through the real gRPC server: two engines on one
// PostgreSQL database (history/testing/pg_test_server.h) and fake daemons.
// A job belongs to the replica that saw it first; a daemon that reaches the
// other one is redirected (JobRedirect) unless its stream already sends
// jobs served there, in which case only the foreign job's processes are
// refused; a replica that takes a job over resumes its ranks' counts from
// the previous owner's checkpoints. Skips where the PostgreSQL server
// binaries are not installed.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/history/testing/pg_test_server.h"
#include "engine/testing/fake_daemon.h"

namespace xpu::engine {
namespace {

using testing::FakeDaemon;
using testing::RankBatch;
using testing::TestOptions;
using testing::WaitFor;

class ReplicaIngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    bool missing = false;
    history::testing::PgTestServer* pg = history::testing::PgTestServer::Get(&why, &missing);
    if (pg == nullptr && missing) GTEST_SKIP() << why;
    ASSERT_NE(pg, nullptr) << why;
    absl::StatusOr<std::string> db = pg->NewDatabase("replica_ingest");
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *db;
  }
  std::unique_ptr<Engine> Replica(const std::string& id) {
    EngineOptions o = TestOptions();
    o.db = db_;
    o.replica_id = id;
    o.lease_ttl_s = 600;  // nothing expires during a test
    auto e = Engine::Start(o);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }
  static uint64_t RankRecords(Engine& e, const std::string& job, const std::string& key) {
    auto j = e.registry().FindJob(job);
    if (!j) return 0;
    std::lock_guard<std::mutex> l(j->mu());
    auto it = j->processes().find(key);
    return it == j->processes().end() ? 0 : it->second->records;
  }
  // Reads until the acknowledgement of `seq`.
  static bool ReadAck(FakeDaemon& d, uint64_t seq, xpu::v1::BatchAck* ack) {
    xpu::v1::EngineMessage m;
    while (d.Read(&m)) {
      if (m.has_batch_ack() && m.batch_ack().batch_seq() >= seq) {
        *ack = m.batch_ack();
        return true;
      }
    }
    return false;
  }
  std::string db_;
};

TEST_F(ReplicaIngestTest, ADaemonAtTheWrongReplicaIsRedirectedToTheOwner) {
  auto a = Replica("a");
  auto b = Replica("b");
  ASSERT_TRUE(a && b);
  FakeDaemon d1(a->port(), "d1");
  ASSERT_TRUE(d1.Hello());
  ASSERT_TRUE(d1.Send(RankBatch("job1", 0, 100, true, 1)));
  xpu::v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(d1, 1, &ack));
  EXPECT_EQ(RankRecords(*a, "job1", "rank:0"), 100u);

  FakeDaemon d2(b->port(), "d2");
  ASSERT_TRUE(d2.Hello());
  ASSERT_TRUE(d2.Send(RankBatch("job1", 1, 50, true, 1)));
  xpu::v1::EngineMessage m;
  ASSERT_TRUE(d2.Read(&m));
  ASSERT_TRUE(m.has_redirect()) << m.DebugString();
  EXPECT_EQ(m.redirect().job(), "job1");
  EXPECT_EQ(m.redirect().replica_id(), "a");
  EXPECT_EQ(m.redirect().address(), "127.0.0.1:" + std::to_string(a->port()));
  const grpc::Status st = d2.FinishAfterClose();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("served by engine replica a"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(b->registry().FindJob("job1"), nullptr) << "nothing of a redirected batch is applied";

  // Sent to the owner, the records count there.
  FakeDaemon d3(a->port(), "d2");
  ASSERT_TRUE(d3.Hello());
  ASSERT_TRUE(d3.Send(RankBatch("job1", 1, 50, true, 1)));
  ASSERT_TRUE(ReadAck(d3, 1, &ack));
  EXPECT_EQ(RankRecords(*a, "job1", "rank:1"), 50u);
  d1.Finish().IgnoreError();
  d3.Finish().IgnoreError();
}

TEST_F(ReplicaIngestTest, AStreamOfJobsServedHereRefusesOnlyTheForeignJob) {
  auto a = Replica("a");
  auto b = Replica("b");
  ASSERT_TRUE(a && b);
  FakeDaemon d1(a->port(), "d1");
  ASSERT_TRUE(d1.Hello());
  ASSERT_TRUE(d1.Send(RankBatch("job1", 0, 10, true, 1)));
  xpu::v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(d1, 1, &ack));

  FakeDaemon d2(b->port(), "d2");
  ASSERT_TRUE(d2.Hello());
  xpu::v1::Batch mixed = RankBatch("job2", 0, 20, true, 1);  // b's
  *mixed.add_processes() = RankBatch("job1", 1, 30, true, 1).processes(0);  // a's
  mixed.mutable_processes(1)->set_process_key(7);
  ASSERT_TRUE(d2.Send(mixed));
  ASSERT_TRUE(ReadAck(d2, 1, &ack));
  ASSERT_EQ(ack.rejected_size(), 1) << ack.DebugString();
  EXPECT_EQ(ack.rejected(0).process_key(), 7u);
  EXPECT_EQ(ack.rejected(0).reason(), "served_elsewhere");
  EXPECT_EQ(ack.rejected(0).records(), 30u) << "the daemon counts them lost";
  EXPECT_EQ(RankRecords(*b, "job2", "rank:0"), 20u);
  EXPECT_EQ(b->registry().FindJob("job1"), nullptr);
  d1.Finish().IgnoreError();
  d2.Finish().IgnoreError();
}

TEST_F(ReplicaIngestTest, AFinishedJobNoLongerHoldsTheStream) {
  auto a = Replica("a");
  auto b = Replica("b");
  ASSERT_TRUE(a && b);
  FakeDaemon d1(a->port(), "d1");
  ASSERT_TRUE(d1.Hello());
  ASSERT_TRUE(d1.Send(RankBatch("job1", 0, 10, true, 1)));
  xpu::v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(d1, 1, &ack));

  // The node's previous job ran at b and ended; its next job is a's.
  FakeDaemon d2(b->port(), "d2");
  ASSERT_TRUE(d2.Hello());
  xpu::v1::Batch last = RankBatch("job0", 0, 5, true, 1);
  last.mutable_processes(0)->set_exited(true);
  ASSERT_TRUE(d2.Send(last));
  ASSERT_TRUE(ReadAck(d2, 1, &ack));
  ASSERT_TRUE(d2.Send(RankBatch("job1", 1, 30, true, 2)));
  xpu::v1::EngineMessage m;
  while (d2.Read(&m) && !m.has_redirect()) {
  }
  EXPECT_TRUE(m.has_redirect()) << "redirected, not refused: " << m.DebugString();
  EXPECT_EQ(m.redirect().replica_id(), "a");
  d2.FinishAfterClose().IgnoreError();
  d1.Finish().IgnoreError();
}

TEST_F(ReplicaIngestTest, TheNextReplicaResumesAJobFromItsCheckpoints) {
  auto a = Replica("a");
  auto b = Replica("b");
  ASSERT_TRUE(a && b);
  {
    FakeDaemon d(a->port(), "d1");
    ASSERT_TRUE(d.Hello());
    ASSERT_TRUE(d.Send(RankBatch("job1", 0, 100, true, 1)));
    xpu::v1::BatchAck ack;
    ASSERT_TRUE(ReadAck(d, 1, &ack));  // durable
    d.Finish().IgnoreError();
  }
  a.reset();  // a clean stop ends a's lease: the job may move at once
  FakeDaemon d(b->port(), "d1");
  ASSERT_TRUE(d.Hello());
  ASSERT_TRUE(d.Send(RankBatch("job1", 0, 10, true, 2)));
  xpu::v1::BatchAck ack;
  ASSERT_TRUE(ReadAck(d, 2, &ack));
  EXPECT_EQ(ack.rejected_size(), 0);
  EXPECT_EQ(RankRecords(*b, "job1", "rank:0"), 110u) << "a's 100 carried on, then 10 more";
  d.Finish().IgnoreError();
}

TEST(ReplicaOptionsTest, ReplicasNeedAPostgresDatabase) {
  EngineOptions o = TestOptions();
  o.replica_id = "a";
  auto e = Engine::Start(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("PostgreSQL"), std::string::npos) << e.status();
  o.replica_id = "";
  o.advertise_addr = "10.0.0.1:7441";
  e = Engine::Start(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--replica-id"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace xpu::engine
