#include "daemon/collector.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/ring/testing/test_ring_writer.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;

constexpr uint64_t kSec = 1000000000ull;

struct Proc {
  std::unique_ptr<TestRingWriter> ring;
  uint64_t key = 0;
  uint32_t sig = 0;
};

Proc AddProc(Collector& c, const std::string& job, int rank, int32_t pid = 100,
             uint32_t cap = 1024) {
  TestRingConfig cfg;
  cfg.job = job;
  cfg.rank = rank;
  cfg.pid = pid;
  cfg.ring_capacity = cap;
  Proc p;
  p.ring = TestRingWriter::Create(cfg);
  p.sig = p.ring->AddSignature(XPU_OP_KERNEL, "k-" + job);
  ring::RingReaderOptions ro;
  ro.abandon_grace_ns = 0;
  p.key = c.AddRing(std::move(ring::RingReader::FromFd(p.ring->fd(), ro).value()), PeerInfo{}, 0)
              .value();
  return p;
}

CollectorOptions Opts() {
  CollectorOptions o;
  o.table.history_records = 100;
  o.retain_exited_ns = 10 * kSec;
  o.liveness_interval_ns = ~0ull;
  return o;
}

xpu_record_v1 Rec(uint32_t sig, uint64_t start) {
  return TestRingWriter::MakeRecord(sig, start, 10, XPU_REC_TIMED);
}

TEST(CollectorTest, TwoJobsOnOneNodeStaySeparate) {
  Collector c(Opts());
  Proc a = AddProc(c, "job-a", 0, 100);
  Proc b = AddProc(c, "job-b", 0, 100);  // same pid/start time, other job
  EXPECT_NE(a.key, b.key);
  for (int i = 0; i < 5; ++i) a.ring->Write(Rec(a.sig, i));
  for (int i = 0; i < 7; ++i) b.ring->Write(Rec(b.sig, i));
  EXPECT_EQ(c.DrainOnce(1), 12u);
  auto batches = c.TakeBatches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].processes_size(), 2);
  for (const auto& pb : batches[0].processes()) {
    const bool is_a = pb.identity().job() == "job-a";
    EXPECT_EQ(pb.process_key(), is_a ? a.key : b.key);
    EXPECT_EQ(pb.records().size() / 32, is_a ? 5u : 7u);
    ASSERT_EQ(pb.signatures_size(), 1);
    EXPECT_EQ(pb.signatures(0).name(), is_a ? "k-job-a" : "k-job-b");
  }
  // A second registration of the same (job, pid, start) while connected fails.
  TestRingConfig dup;
  dup.job = "job-a";
  dup.pid = 100;
  auto ring = TestRingWriter::Create(dup);
  EXPECT_EQ(
      c.AddRing(std::move(ring::RingReader::FromFd(ring->fd(), ring::RingReaderOptions{}).value()),
                PeerInfo{}, 0)
          .status()
          .code(),
      absl::StatusCode::kAlreadyExists);
}

TEST(CollectorTest, BatchesCarryDeltasAndSplitLargeRecordRuns) {
  CollectorOptions o = Opts();
  o.max_records_per_message = 64;
  o.max_batch_bytes = 64 * 32 * 2;  // two full chunks per message
  Collector c(o);
  Proc p = AddProc(c, "job", 0, 100, 4096);
  for (int i = 0; i < 1000; ++i) p.ring->Write(Rec(p.sig, i));
  c.DrainOnce(1);
  auto batches = c.TakeBatches();
  size_t records = 0, sigs = 0, chunks = 0;
  uint64_t expect_pos = 0;
  for (const auto& b : batches) {
    EXPECT_LE(b.processes_size(), 2);
    for (const auto& pb : b.processes()) {
      ++chunks;
      EXPECT_LE(pb.records().size(), 64u * 32);
      EXPECT_EQ(pb.first_position(), expect_pos);
      expect_pos += pb.records().size() / 32;
      records += pb.records().size() / 32;
      sigs += pb.signatures_size();
      EXPECT_EQ(pb.identity().job(), "job");
    }
  }
  EXPECT_EQ(records, 1000u);
  EXPECT_EQ(sigs, 1u);
  EXPECT_EQ(chunks, 16u);  // ceil(1000 / 64)
  // Next flush: no new records or signatures, but the process still reports.
  batches = c.TakeBatches();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].processes_size(), 1);
  EXPECT_TRUE(batches[0].processes(0).records().empty());
  EXPECT_EQ(batches[0].processes(0).signatures_size(), 0);
  EXPECT_EQ(batches[0].processes(0).counters().records_read(), 1000u);
  // Reconnect state: identity and every signature handed out so far.
  auto full = c.FullState();
  ASSERT_EQ(full.size(), 1u);
  EXPECT_EQ(full[0].signatures_size(), 1);
}

TEST(CollectorTest, DisconnectDrainsThenExitsOnceAndIsRetained) {
  Collector c(Opts());
  Proc p = AddProc(c, "job", 3);
  for (int i = 0; i < 30; ++i) p.ring->Write(Rec(p.sig, 10 * kSec + i));
  c.MarkDisconnected(p.key, 1 * kSec);
  c.DrainOnce(1 * kSec);
  auto b1 = c.TakeBatches();
  ASSERT_EQ(b1.size(), 1u);
  const auto& pb = b1[0].processes(0);
  EXPECT_EQ(pb.records().size() / 32, 30u);
  EXPECT_TRUE(pb.exited());
  EXPECT_TRUE(c.TakeBatches().empty());  // exit reported once, then silent
  // History stays queryable until retention ends.
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  cmd.set_job("job");
  xpu::v1::CommandReply reply;
  c.HandleCommand(cmd, &reply);
  ASSERT_EQ(reply.processes_size(), 1);
  EXPECT_TRUE(reply.processes(0).exited());
  EXPECT_EQ(c.stats().processes, 1u);
  c.DrainOnce(12 * kSec);
  EXPECT_EQ(c.stats().processes, 0u);
}

TEST(CollectorTest, DisconnectedRingThatNeverDrainsTimesOut) {
  CollectorOptions o = Opts();
  o.drain_timeout_ns = 5 * kSec;
  Collector c(o);
  TestRingConfig cfg;
  auto ring = TestRingWriter::Create(cfg);
  ring::RingReaderOptions ro;
  ro.abandon_grace_ns = 100 * kSec;  // the stuck slot is never skipped in time
  const uint64_t key =
      c.AddRing(std::move(ring::RingReader::FromFd(ring->fd(), ro).value()), PeerInfo{}, 0).value();
  ring->ReserveWithoutCommit();
  c.MarkDisconnected(key, 1 * kSec);
  c.DrainOnce(2 * kSec);
  EXPECT_EQ(c.stats().processes_live, 1u);
  c.DrainOnce(6 * kSec);
  EXPECT_EQ(c.stats().processes_live, 0u);
}

TEST(CollectorTest, HistoryCommandFiltersByJobRanksLastNAndSince) {
  Collector c(Opts());
  Proc r0 = AddProc(c, "job", 0, 100);
  Proc r1 = AddProc(c, "job", 1, 101);
  Proc other = AddProc(c, "other", 0, 102);
  for (int i = 0; i < 250; ++i) {  // history keeps the newest 100
    r0.ring->Write(Rec(r0.sig, 1000 + i));
    r1.ring->Write(Rec(r1.sig, 1000 + i));
    other.ring->Write(Rec(other.sig, 1000 + i));
  }
  c.DrainOnce(1);
  auto ask = [&](std::vector<int> ranks, uint64_t last_n, uint64_t since) {
    xpu::v1::Command cmd;
    cmd.set_command_id(5);
    cmd.set_kind("history");
    cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
    cmd.set_job("job");
    for (int r : ranks) cmd.add_ranks(r);
    cmd.set_last_n(last_n);
    cmd.set_since_ns(since);
    xpu::v1::CommandReply reply;
    c.HandleCommand(cmd, &reply);
    EXPECT_EQ(reply.command_id(), 5u);
    EXPECT_TRUE(reply.ok());
    return reply;
  };
  auto all = ask({}, 0, 0);
  ASSERT_EQ(all.processes_size(), 2);
  for (const auto& pb : all.processes()) {
    EXPECT_EQ(pb.identity().job(), "job");
    EXPECT_EQ(pb.records().size() / 32, 100u);
    EXPECT_EQ(pb.first_position(), 150u);
  }
  auto one = ask({1}, 10, 0);
  ASSERT_EQ(one.processes_size(), 1);
  EXPECT_EQ(one.processes(0).identity().rank(), 1);
  ASSERT_EQ(one.processes(0).records().size(), 10u * 32);
  xpu_record_v1 first;
  memcpy(&first, one.processes(0).records().data(), 32);
  EXPECT_EQ(first.start_ns, 1240u);  // the newest 10, oldest first
  auto since = ask({0}, 0, 1245);
  EXPECT_EQ(since.processes(0).records().size() / 32, 5u);
  xpu::v1::Command bad;
  bad.set_kind("flamegraph");
  bad.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  xpu::v1::CommandReply reply;
  c.HandleCommand(bad, &reply);
  EXPECT_FALSE(reply.ok());
  EXPECT_EQ(reply.error(), "unknown command: flamegraph");
}

TEST(CollectorTest, HistoryReplyIsBoundedAndSaysSo) {
  CollectorOptions o = Opts();
  o.max_reply_records = 150;
  Collector c(o);
  Proc r0 = AddProc(c, "job", 0, 100);
  Proc r1 = AddProc(c, "job", 1, 101);
  for (int i = 0; i < 100; ++i) {
    r0.ring->Write(Rec(r0.sig, i));
    r1.ring->Write(Rec(r1.sig, i));
  }
  c.DrainOnce(1);
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  xpu::v1::CommandReply reply;
  c.HandleCommand(cmd, &reply);
  size_t n = 0;
  for (const auto& pb : reply.processes()) n += pb.records().size() / 32;
  EXPECT_EQ(n, 150u);
  EXPECT_EQ(reply.payload(), "truncated");
}

TEST(CollectorTest, HistoryBudgetIsSharedFairlySoNoRankIsStarved) {
  // 8 ranks; rank 2 has few records. Budget 400: rank 2 gets all of its 10,
  // the 7 others share the remaining 390 equally (55 or 56 each, newest
  // first); before the fix the first ranks took everything and the last
  // ones got zero.
  CollectorOptions o = Opts();
  o.max_reply_records = 400;
  Collector c(o);
  std::vector<Proc> procs;
  for (int r = 0; r < 8; ++r) procs.push_back(AddProc(c, "job", r, 100 + r));
  for (int i = 0; i < 100; ++i) {
    for (int r = 0; r < 8; ++r) {
      if (r != 2 || i < 10) procs[r].ring->Write(Rec(procs[r].sig, i));
    }
  }
  c.DrainOnce(1);
  xpu::v1::Command cmd;
  cmd.set_kind("history");
  cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  xpu::v1::CommandReply reply;
  c.HandleCommand(cmd, &reply);
  ASSERT_EQ(reply.processes_size(), 8);
  size_t total = 0;
  for (const auto& pb : reply.processes()) {
    const size_t n = pb.records().size() / 32;
    total += n;
    if (pb.identity().rank() == 2) {
      EXPECT_EQ(n, 10u);
    } else {
      EXPECT_GE(n, 55u) << "rank " << pb.identity().rank();
      EXPECT_LE(n, 56u) << "rank " << pb.identity().rank();
    }
  }
  EXPECT_EQ(total, 400u);
  EXPECT_EQ(reply.payload(), "truncated");

  // The next, older page (xpu timeline dump --before): records that started
  // before the newest of the ranks' oldest; together the pages hold every
  // record of every rank.
  std::map<int32_t, std::set<uint64_t>> starts;
  uint64_t before = 0;
  for (const auto& pb : reply.processes()) {
    uint64_t oldest = ~0ull;
    for (size_t i = 0; i < pb.records().size() / 32; ++i) {
      xpu_record_v1 r;
      memcpy(&r, pb.records().data() + i * 32, 32);
      starts[pb.identity().rank()].insert(r.start_ns);
      oldest = std::min<uint64_t>(oldest, r.start_ns);
    }
    before = std::max(before, oldest);
  }
  cmd.set_until_ns(before);
  xpu::v1::CommandReply page2;
  c.HandleCommand(cmd, &page2);
  ASSERT_EQ(page2.processes_size(), 8);
  EXPECT_NE(page2.payload(), "truncated");
  for (const auto& pb : page2.processes()) {
    for (size_t i = 0; i < pb.records().size() / 32; ++i) {
      xpu_record_v1 r;
      memcpy(&r, pb.records().data() + i * 32, 32);
      EXPECT_LT(r.start_ns, before);
      starts[pb.identity().rank()].insert(r.start_ns);
    }
  }
  for (int r = 0; r < 8; ++r) EXPECT_EQ(starts[r].size(), r == 2 ? 10u : 100u) << "rank " << r;
}

TEST(CollectorTest, VanishedPidIsDetectedThroughProc) {
  CollectorOptions o = Opts();
  o.liveness_interval_ns = 0;
  Collector c(o);
  TestRingConfig cfg;
  auto ring = TestRingWriter::Create(cfg);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status;
  waitpid(child, &status, 0);  // reaped: /proc/<child> is gone
  PeerInfo peer;
  peer.pid = child;
  c.AddRing(std::move(ring::RingReader::FromFd(ring->fd(), ring::RingReaderOptions{}).value()),
            peer, 0)
      .value();
  PeerInfo self;
  self.pid = getpid();
  self.start_ticks = ReadProcStartTicks(getpid());
  ASSERT_NE(self.start_ticks, 0u);
  TestRingConfig cfg2;
  cfg2.pid = 5;
  auto ring2 = TestRingWriter::Create(cfg2);
  c.AddRing(std::move(ring::RingReader::FromFd(ring2->fd(), ring::RingReaderOptions{}).value()),
            self, 0)
      .value();
  c.DrainOnce(1);
  EXPECT_EQ(c.stats().processes_live, 1u);  // only the live one
}

TEST(HistoryBufferTest, UpperBoundSelectsAnOlderPage) {
  HistoryBuffer h(10);
  for (uint64_t i = 1; i <= 10; ++i) {
    ring::RingRecord r{};
    r.rec.start_ns = i * 100;
    r.position = i;
    h.Push(r);
  }
  EXPECT_EQ(h.Count(0, 0, 500), 4u);  // 100..400
  EXPECT_EQ(h.Count(2, 0, 500), 2u);
  std::vector<ring::RingRecord> page = h.Snapshot(2, 0, 500);
  ASSERT_EQ(page.size(), 2u);  // the newest two before 500, oldest first
  EXPECT_EQ(page[0].rec.start_ns, 300u);
  EXPECT_EQ(page[1].rec.start_ns, 400u);
  EXPECT_EQ(h.Snapshot(0, 200, 500).size(), 3u);  // 200..400
  EXPECT_EQ(h.Snapshot(0, 0, 0).size(), 10u);     // no bound
}

TEST(HistoryBufferTest, KeepsTheNewestInOrder) {
  HistoryBuffer h(4);
  for (uint64_t i = 0; i < 10; ++i) h.Push(ring::RingRecord{i, Rec(1, i)});
  EXPECT_EQ(h.size(), 4u);
  auto all = h.Snapshot(0, 0);
  ASSERT_EQ(all.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(all[i].position, 6 + i);
  auto two = h.Snapshot(2, 0);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].position, 8u);
  EXPECT_EQ(h.Snapshot(0, 100).size(), 0u);
}

// The daemon's own check, whatever the engine says: a user acts on its own
// processes only; all_jobs callers (root, the admin group, act tokens) on
// all; the engine's automatic actions only where allowed; no caller, no act.
TEST(CallerMayActTest, OnlyTheProcesssUserOrAnAllJobsCaller) {
  std::string why;
  xpu::v1::Command cmd;
  cmd.set_kind("evidence");
  EXPECT_FALSE(CallerMayAct(cmd, 1000, true, &why));
  EXPECT_NE(why.find("no caller"), std::string::npos) << why;

  cmd.mutable_caller()->set_uid(1001);
  cmd.mutable_caller()->set_name("uid 1001");
  EXPECT_FALSE(CallerMayAct(cmd, 1000, true, &why));
  EXPECT_EQ(why, "uid 1001 may not act on a process of uid 1000");
  EXPECT_FALSE(CallerMayAct(cmd, 0, true, &why));  // nor on root's
  EXPECT_TRUE(CallerMayAct(cmd, 1001, true, &why));

  cmd.mutable_caller()->set_uid(-1);  // a role credential without all_jobs
  EXPECT_FALSE(CallerMayAct(cmd, 1001, true, &why));
  cmd.mutable_caller()->set_all_jobs(true);
  EXPECT_TRUE(CallerMayAct(cmd, 1000, true, &why));

  xpu::v1::Command automatic;
  automatic.mutable_caller()->set_engine(true);
  EXPECT_TRUE(CallerMayAct(automatic, 1000, true, &why));
  EXPECT_FALSE(CallerMayAct(automatic, 1000, false, &why));
  EXPECT_NE(why.find("automatic"), std::string::npos) << why;
}

}  // namespace
}  // namespace xpu::daemon
