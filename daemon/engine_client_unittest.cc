#include "daemon/engine_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/ring/testing/test_ring_writer.h"
#include "common/wire/record_codec.h"
#include "daemon/collector.h"
#include "daemon/test_fakes.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;
using testing::FakeEngine;
using testing::FakeIngest;
using testing::WaitFor;

EngineClientOptions ClientOptions(int port) {
  EngineClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.daemon_id = "node0:1:2";
  o.host = "node0";
  o.token = "secret";
  o.backoff_initial_ms = 20;
  o.backoff_max_ms = 200;
  o.heartbeat_ms = 100000;
  return o;
}

// A ring with signatures and records, drained by a real collector.
struct Node {
  Node() {
    CollectorOptions co;
    co.table.history_records = 100000;
    collector = std::make_unique<Collector>(co);
    TestRingConfig cfg;
    cfg.ring_capacity = 1 << 14;
    ring = TestRingWriter::Create(cfg);
    sig_a = ring->AddSignature(XPU_OP_GEMM, "gemm");
    sig_b = ring->AddSignature(XPU_OP_ALLREDUCE, "allreduce");
    auto reader = ring::RingReader::FromFd(ring->fd(), ring::RingReaderOptions{});
    key = collector->AddRing(std::move(*reader), PeerInfo{}, MonotonicNs()).value();
  }
  // Writes n records, drains and returns the batches built from them.
  std::vector<xpu::v1::Batch> Produce(int n, uint32_t sig) {
    for (int i = 0; i < n; ++i)
      ring->Write(TestRingWriter::MakeRecord(sig, 1000 + i, 5, XPU_REC_TIMED));
    collector->DrainOnce(MonotonicNs());
    return collector->TakeBatches();
  }
  std::unique_ptr<Collector> collector;
  std::unique_ptr<TestRingWriter> ring;
  uint32_t sig_a = 0, sig_b = 0;
  uint64_t key = 0;
};

size_t RecordsOf(const xpu::v1::Batch& b) {
  size_t n = 0;
  for (const auto& p : b.processes()) n += p.records().size() / 32;
  return n;
}

TEST(EngineClientTest, LoopbackRule) {
  EXPECT_TRUE(IsLoopbackTarget("127.0.0.1:7441"));
  EXPECT_TRUE(IsLoopbackTarget("localhost:7441"));
  EXPECT_TRUE(IsLoopbackTarget("[::1]:7441"));
  EXPECT_TRUE(IsLoopbackTarget("ipv4:127.0.0.2:1"));
  EXPECT_TRUE(IsLoopbackTarget("unix:/tmp/x.sock"));
  EXPECT_FALSE(IsLoopbackTarget("10.0.0.1:7441"));
  EXPECT_FALSE(IsLoopbackTarget("engine.example.com:7441"));
  EXPECT_FALSE(IsLoopbackTarget("127x.evil.com:1"));
  // Judged by what the name resolves to, not by its prefix (no such name).
  EXPECT_FALSE(IsLoopbackTarget("127.0.0.1.invalid:1"));
  EngineClientOptions o;
  o.target = "10.1.2.3:7441";
  EXPECT_EQ(EngineClient::Create(o, nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.insecure = true;
  EXPECT_TRUE(EngineClient::Create(o, nullptr, nullptr).ok());
  o.insecure = false;
  o.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_FALSE(EngineClient::Create(o, nullptr, nullptr).ok());
}

TEST(EngineClientTest, SeveralEnginesAreOneCommaSeparatedList) {
  EXPECT_EQ(SplitEngineTargets("a:1"), std::vector<std::string>{"a:1"});
  EXPECT_EQ(SplitEngineTargets(" a:1 , b:2,,"), (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(SplitEngineTargets("ipv4:127.0.0.1:1,127.0.0.1:2"),
            std::vector<std::string>{"ipv4:127.0.0.1:1,127.0.0.1:2"})
      << "gRPC's own address list stays one target";
  EXPECT_TRUE(SplitEngineTargets(" , ").empty());
  EngineClientOptions o = ClientOptions(1);
  o.target = ",";
  EXPECT_FALSE(EngineClient::Create(o, nullptr, nullptr).ok());
  o.target = "127.0.0.1:1,10.0.0.1:7441";
  auto c = EngineClient::Create(o, nullptr, nullptr);
  ASSERT_FALSE(c.ok()) << "plaintext to any non-loopback engine of the list is refused";
  EXPECT_NE(c.status().message().find("10.0.0.1"), std::string::npos) << c.status();
}

// Engine replicas: the first engine of the list is gone, the next answers;
// a replica that does not serve the job redirects the daemon to the one that
// does, and everything unacknowledged goes there.
TEST(EngineClientTest, NextEngineOfTheListAndRedirectsCarryTheUnacknowledged) {
  FakeEngine owner;
  FakeEngine other;
  other.service.With([&](FakeIngest& s) {
    s.redirect_to_ = "127.0.0.1:" + std::to_string(owner.port());
    return 0;
  });
  int dead_port = 0;
  {
    FakeEngine gone;
    dead_port = gone.port();
  }
  Node node;
  EngineClientOptions o = ClientOptions(dead_port);
  o.target =
      "127.0.0.1:" + std::to_string(dead_port) + ",127.0.0.1:" + std::to_string(other.port());
  auto client =
      std::move(EngineClient::Create(o, node.collector.get(), node.collector.get()).value());
  size_t produced = 0;
  for (int i = 0; i < 3; ++i) {
    for (auto& b : node.Produce(100, node.sig_a)) {
      produced += RecordsOf(b);
      client->Enqueue(std::move(b));
    }
  }
  client->Start();
  ASSERT_TRUE(WaitFor([&] {
    return owner.service.With([&](FakeIngest& s) {
      size_t n = 0;
      for (const auto& b : s.batches_) n += RecordsOf(b);
      return n == produced;
    });
  })) << "every record reaches the replica that serves the job";
  const EngineClientStats st = client->stats();
  EXPECT_GE(st.redirects, 1u);
  EXPECT_GE(st.connect_failures, 1u) << "the dead engine was tried";
  EXPECT_EQ(st.target, "127.0.0.1:" + std::to_string(owner.port()));
  EXPECT_TRUE(st.connected);
  EXPECT_GE(other.service.With([](FakeIngest& s) { return s.redirected_; }), 1);
  EXPECT_TRUE(other.service.With([](FakeIngest& s) { return s.batches_.empty(); }));
  client->Stop();
}

TEST(EngineClientTest, HelloResyncAndBatchesArriveWithTheRightCounts) {
  FakeEngine engine;
  Node node;
  auto client = std::move(
      EngineClient::Create(ClientOptions(engine.port()), node.collector.get(), node.collector.get())
          .value());
  client->Start();
  ASSERT_TRUE(WaitFor([&] { return client->stats().connected; }));
  size_t sent = 0;
  for (int round = 0; round < 3; ++round) {
    for (auto& b : node.Produce(100 + round, round % 2 ? node.sig_a : node.sig_b))
      client->Enqueue(std::move(b));
    sent += 100 + round;
  }
  ASSERT_TRUE(WaitFor([&] { return client->stats().batches_sent == 3; }));
  // Written by the client is not yet read by the server: wait for the latter.
  ASSERT_TRUE(WaitFor(
      [&] { return engine.service.With([](FakeIngest& s) { return s.batches_.size() == 4; }); }));
  engine.service.With([&](FakeIngest& s) {
    ASSERT_EQ(s.hellos_.size(), 1u);
    EXPECT_EQ(s.hellos_[0].protocol_version(), 1u);
    EXPECT_EQ(s.hellos_[0].daemon_id(), "node0:1:2");
    EXPECT_EQ(s.hellos_[0].token(), "secret");
    ASSERT_EQ(s.batches_.size(), 4u);  // resync + 3
    EXPECT_EQ(s.batches_[0].batch_seq(), 0u);
    size_t records = 0, sigs = 0;
    for (size_t i = 1; i < s.batches_.size(); ++i) {
      const auto& b = s.batches_[i];
      EXPECT_EQ(b.batch_seq(), i);
      ASSERT_EQ(b.processes_size(), 1);
      const auto& pb = b.processes(0);
      EXPECT_EQ(pb.process_key(), node.key);
      EXPECT_EQ(pb.identity().job(), "job-1");
      EXPECT_EQ(pb.counters().hook_size(), XPU_CNT_MAX);
      records += RecordsOf(b);
      sigs += pb.signatures_size();
      // Records travel packed, the commit word carrying the low 32 bits of
      // the ring position + 1 (the engine's duplicate check), or 0.
      for (size_t r = 0; r < pb.records().size(); r += 32) {
        xpu_record_v1 rec;
        memcpy(&rec, pb.records().data() + r, 32);
        EXPECT_NE(rec.commit, 0u);
      }
    }
    EXPECT_EQ(records, sent);
    EXPECT_EQ(sigs, 2u);  // delta: each signature once
    EXPECT_EQ(s.batches_.back().records_dropped(), 0u);
  });
  client->Stop();
}

// The compact record encoding goes only to an engine that says it reads it
// (HelloAck.compact_records), and only when the daemon is not told --wire
// raw; the records that arrive are the ring's, whatever the form.
TEST(EngineClientTest, CompactRecordsOnlyToAnEngineThatReadsThem) {
  for (const bool engine_reads : {true, false}) {
    for (const bool daemon_compact : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "engine reads compact " << engine_reads << ", daemon --wire "
                   << (daemon_compact ? "compact" : "raw"));
      FakeEngine engine;
      engine.service.With([&](FakeIngest& s) { return s.compact_records_ = engine_reads; });
      Node node;
      EngineClientOptions o = ClientOptions(engine.port());
      o.compact_records = daemon_compact;
      auto client =
          std::move(EngineClient::Create(o, node.collector.get(), node.collector.get()).value());
      client->Start();
      ASSERT_TRUE(WaitFor([&] { return client->stats().connected; }));
      for (auto& b : node.Produce(500, node.sig_a)) client->Enqueue(std::move(b));
      ASSERT_TRUE(WaitFor([&] {
        return engine.service.With([](FakeIngest& s) {
          uint64_t n = 0;
          for (const auto& b : s.batches_)
            for (const auto& pb : b.processes())
              n += pb.records().size() / 32 + wire::CompactRecordCount(pb.compact_records());
          return n == 500;
        });
      }));
      const bool compact = engine_reads && daemon_compact;
      engine.service.With([&](FakeIngest& s) {
        std::vector<xpu_record_v1> got;
        for (const auto& b : s.batches_) {
          for (const auto& pb : b.processes()) {
            EXPECT_FALSE(!pb.records().empty() && !pb.compact_records().empty());
            if (!pb.compact_records().empty()) {
              EXPECT_TRUE(compact);
              ASSERT_TRUE(wire::DecodeCompactRecords(pb.compact_records(), &got).ok());
            }
            for (size_t r = 0; r < pb.records().size(); r += 32) {
              EXPECT_FALSE(compact);
              xpu_record_v1 rec;
              memcpy(&rec, pb.records().data() + r, 32);
              got.push_back(rec);
            }
          }
        }
        ASSERT_EQ(got.size(), 500u);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].sig_id, node.sig_a);
          EXPECT_EQ(got[i].start_ns, 1000 + i);
          EXPECT_EQ(got[i].commit, i + 1) << "ring position + 1";
        }
      });
      const EngineClientStats st = client->stats();
      EXPECT_EQ(st.batches_compact > 0, compact);
      if (compact) {
        EXPECT_LT(st.record_bytes_sent, 500u * 32 / 3);
      } else {
        EXPECT_EQ(st.record_bytes_sent, 500u * 32);
      }
      client->Stop();
    }
  }
}

TEST(EngineClientTest, BuffersDropsPastBudgetReconnectsAndResendsSignatures) {
  auto engine = std::make_unique<FakeEngine>();
  const int port = engine->port();
  Node node;
  EngineClientOptions o = ClientOptions(port);
  o.buffer_bytes = 40 * 1024;  // ~1200 records
  auto client =
      std::move(EngineClient::Create(o, node.collector.get(), node.collector.get()).value());
  client->Start();
  ASSERT_TRUE(WaitFor([&] { return client->stats().connected; }));
  engine->Stop();
  ASSERT_TRUE(WaitFor([&] { return !client->stats().connected; }));

  // Engine down: 10 batches of 500 records (16 KB each) against a 40 KB budget.
  // The first carries both signatures and will lose its records.
  for (int i = 0; i < 10; ++i) {
    for (auto& b : node.Produce(500, i == 0 ? node.sig_a : node.sig_b))
      client->Enqueue(std::move(b));
  }
  const EngineClientStats down = client->stats();
  EXPECT_GT(down.batches_dropped, 0u);
  EXPECT_EQ(down.records_dropped, down.batches_dropped * 500);
  EXPECT_LE(down.bytes_buffered, o.buffer_bytes);
  EXPECT_EQ(down.batches_sent, 0u);  // nothing could be sent while down

  engine = std::make_unique<FakeEngine>(port);
  ASSERT_EQ(engine->port(), port);
  ASSERT_TRUE(WaitFor(
      [&] { return client->stats().connects == 2 && client->stats().batches_buffered == 0; }));
  const uint64_t expected_batches = 1 + client->stats().batches_sent;  // resync + buffered ones
  ASSERT_TRUE(WaitFor([&] {
    return engine->service.With(
        [&](FakeIngest& s) { return s.batches_.size() == expected_batches; });
  }));
  engine->service.With([&](FakeIngest& s) {
    ASSERT_EQ(s.hellos_.size(), 1u);
    ASSERT_GE(s.batches_.size(), 2u);
    // First after the reconnect: the full signature table of the live process.
    const auto& resync = s.batches_[0];
    ASSERT_EQ(resync.processes_size(), 1);
    EXPECT_EQ(resync.processes(0).signatures_size(), 2);
    EXPECT_EQ(RecordsOf(resync), 0u);
    size_t records = 0, sigs = 0;
    for (size_t i = 1; i < s.batches_.size(); ++i) {
      records += RecordsOf(s.batches_[i]);
      for (const auto& pb : s.batches_[i].processes()) sigs += pb.signatures_size();
    }
    // Every record not counted as dropped arrived; the dropped batch's
    // signatures were folded into a later batch.
    EXPECT_EQ(records + down.records_dropped, 5000u);
    EXPECT_EQ(sigs, 2u);
    const auto& last = s.batches_.back();
    EXPECT_EQ(last.batches_dropped(), down.batches_dropped);
    EXPECT_EQ(last.records_dropped(), down.records_dropped);
    // The process's own count of what the daemon shed reaches the engine with
    // the full state sent on reconnecting (the losses are reported to the
    // collector, which keeps them in the ring: batches produced before the
    // last shedding carry less).
    EXPECT_EQ(resync.processes(0).counters().records_dropped_daemon(), down.records_dropped);
    EXPECT_LE(last.processes(0).counters().records_dropped_daemon(), down.records_dropped);
  });
  client->Stop();
}

// Two batches of 500 records written to an engine that never acknowledges
// them; it goes away, and 6 more batches of 500 (16 KB each) come while it
// is down, against a 40 KB budget.
struct Outage {
  std::unique_ptr<FakeEngine> engine = std::make_unique<FakeEngine>();
  const int port = engine->port();
  Node node;
  std::unique_ptr<EngineClient> client;
  // The engine that comes back on the same port.
  void NextEngine(const std::function<void(FakeIngest&)>& setup) {
    engine = std::make_unique<FakeEngine>(port, setup);
    ASSERT_EQ(engine->port(), port);
  }
};

void WriteTwoThenGoAway(Outage* t) {
  EngineClientOptions o = ClientOptions(t->port);
  o.buffer_bytes = 40 * 1024;  // ~1200 records
  t->client =
      std::move(EngineClient::Create(o, t->node.collector.get(), t->node.collector.get()).value());
  EngineClient* client = t->client.get();
  client->Start();
  ASSERT_TRUE(WaitFor([&] { return client->stats().connected; }));
  for (int i = 0; i < 2; ++i) {
    for (auto& b : t->node.Produce(500, i == 0 ? t->node.sig_a : t->node.sig_b))
      client->Enqueue(std::move(b));
  }
  ASSERT_TRUE(WaitFor([&] { return client->stats().batches_unacked == 2; }));
  t->engine->Stop();
  // The next attempt puts them back in front of the queue.
  ASSERT_TRUE(WaitFor([&] {
    const EngineClientStats st = client->stats();
    return !st.connected && st.batches_unacked == 0 && st.batches_buffered == 2;
  }));
  for (int i = 0; i < 6; ++i) {
    for (auto& b : t->node.Produce(500, t->node.sig_b)) client->Enqueue(std::move(b));
  }
}

// Batches written to an engine that went away without acknowledging them
// may be stored there: shed while it is away, their records wait for the
// next engine's word (BatchAck.shed_held) before they count as dropped, and
// only those it does not hold do.
TEST(EngineClientTest, ShedRecordsAnEngineMayHoldWaitForItsWord) {
  Outage t;
  ASSERT_NO_FATAL_FAILURE(WriteTwoThenGoAway(&t));
  Node& node = t.node;
  EngineClient* client = t.client.get();
  const EngineClientStats down = client->stats();
  // Both written batches lost their records, unconfirmed; the never written
  // ones that were shed are counted at once.
  EXPECT_EQ(down.records_unconfirmed, 1000u);
  EXPECT_EQ(down.records_dropped + down.records_unconfirmed, down.batches_dropped * 500);
  EXPECT_GT(down.records_dropped, 0u);

  // The next engine holds the first batch (ring positions 0-499), not the second.
  ASSERT_NO_FATAL_FAILURE(t.NextEngine([&](FakeIngest& s) {
    s.ack_batches_ = true;
    s.held_below_[node.key] = 500;
  }));
  ASSERT_TRUE(WaitFor([&] {
    const EngineClientStats st = client->stats();
    return st.connected && st.connects >= 2 && st.batches_buffered == 0 && st.batches_unacked == 0;
  })) << "connects "
      << client->stats().connects << ", buffered " << client->stats().batches_buffered
      << ", unacked " << client->stats().batches_unacked;
  const EngineClientStats up = client->stats();
  EXPECT_EQ(up.records_unconfirmed, 0u);
  EXPECT_EQ(up.records_shed_held, 500u);
  EXPECT_EQ(up.records_dropped, down.records_dropped + 500);
  t.engine->service.With([&](FakeIngest& s) {
    uint64_t runs = 0, named = 0;
    for (const auto& b : s.batches_) {
      for (const auto& pb : b.processes()) {
        for (const auto& r : pb.unconfirmed_shed()) {
          ++runs;
          named += r.records();
          EXPECT_EQ(r.first_position(), 0u);  // the two were contiguous: one run
          EXPECT_EQ(r.end_position(), 1000u);
        }
      }
    }
    EXPECT_EQ(runs, 1u);
    EXPECT_EQ(named, 1000u);
  });
  // The ring's count of what the daemon shed is the client's.
  ASSERT_TRUE(WaitFor([&] {
    for (auto& b : node.Produce(1, node.sig_b)) client->Enqueue(std::move(b));
    return t.engine->service.With([&](FakeIngest& s) {
      const auto& pb = s.batches_.back().processes(0);
      return pb.counters().records_dropped_daemon() == up.records_dropped;
    });
  }));
  client->Stop();
}

// The same runs, written to the next engine in batches that it does not
// acknowledge before the budget releases them: the ack that covers them
// later still settles their records.
TEST(EngineClientTest, ReleasedBatchesLeaveTheirShedRunsToTheAck) {
  Outage t;
  ASSERT_NO_FATAL_FAILURE(WriteTwoThenGoAway(&t));
  Node& node = t.node;
  EngineClient* client = t.client.get();
  ASSERT_EQ(client->stats().records_unconfirmed, 1000u);
  const uint64_t dropped_down = client->stats().records_dropped;

  // The next engine holds the first 500; it reads everything but does not
  // acknowledge yet, and more batches push the written ones out.
  ASSERT_NO_FATAL_FAILURE(t.NextEngine([&](FakeIngest& s) { s.held_below_[node.key] = 500; }));
  ASSERT_TRUE(WaitFor([&] {
    const EngineClientStats st = client->stats();
    return st.connected && st.connects >= 2 && st.batches_buffered == 0;
  }));
  for (int i = 0; i < 6; ++i) {
    for (auto& b : node.Produce(500, node.sig_b)) client->Enqueue(std::move(b));
  }
  ASSERT_TRUE(WaitFor([&] { return client->stats().batches_buffered == 0; }));
  const EngineClientStats released = client->stats();
  EXPECT_GT(released.batches_released_unacked, 0u);
  EXPECT_EQ(released.records_unconfirmed, 1000u) << "released, not settled";

  // Acknowledgements from now on: the first covers the released batches.
  t.engine->service.With([&](FakeIngest& s) { s.ack_batches_ = true; });
  ASSERT_TRUE(WaitFor([&] {
    for (auto& b : node.Produce(1, node.sig_b)) client->Enqueue(std::move(b));
    return client->stats().records_unconfirmed == 0;
  }));
  const EngineClientStats up = client->stats();
  EXPECT_EQ(up.records_shed_held, 500u);
  EXPECT_EQ(up.records_dropped, released.records_dropped + 500);
  EXPECT_GE(released.records_dropped, dropped_down);
  client->Stop();
}

TEST(EngineClientTest, CommandsAreDispatchedAndAnswered) {
  FakeEngine engine;
  Node node;
  node.Produce(50, node.sig_a);
  auto client = std::move(
      EngineClient::Create(ClientOptions(engine.port()), node.collector.get(), node.collector.get())
          .value());
  client->Start();
  ASSERT_TRUE(WaitFor([&] { return client->stats().connected; }));
  xpu::v1::Command history;
  history.set_command_id(7);
  history.set_kind("history");
  history.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  history.set_job("job-1");
  history.set_last_n(10);
  ASSERT_TRUE(WaitFor([&] { return engine.service.SendCommand(history); }));
  xpu::v1::Command other;
  other.set_command_id(8);
  other.set_kind("stacks");
  other.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  ASSERT_TRUE(engine.service.SendCommand(other));
  ASSERT_TRUE(WaitFor(
      [&] { return engine.service.With([](FakeIngest& s) { return s.replies_.size() == 2; }); }));
  engine.service.With([&](FakeIngest& s) {
    const auto& h = s.replies_[0];
    EXPECT_EQ(h.command_id(), 7u);
    EXPECT_TRUE(h.ok());
    ASSERT_EQ(h.processes_size(), 1);
    EXPECT_EQ(h.processes(0).records().size(), 10u * 32);
    EXPECT_EQ(h.processes(0).signatures_size(), 2);
    const auto& u = s.replies_[1];
    EXPECT_EQ(u.command_id(), 8u);
    EXPECT_FALSE(u.ok());
    EXPECT_NE(u.error().find("unknown command"), std::string::npos);
  });
  client->Stop();
}

TEST(EngineClientTest, RefusedHelloIsRetriedWithBackoff) {
  FakeEngine engine;
  EngineClientOptions o = ClientOptions(engine.port());
  o.token = "wrong";
  auto client = std::move(EngineClient::Create(o, nullptr, nullptr).value());
  client->Start();
  ASSERT_TRUE(WaitFor([&] { return client->stats().connect_failures >= 2; }));
  EXPECT_FALSE(client->stats().connected);
  EXPECT_EQ(client->stats().connects, 0u);
  client->Stop();
}

}  // namespace
}  // namespace xpu::daemon
