#include "engine/state/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "engine/detectors/rank_liveness.h"
#include "engine/state/batch_builder.h"

namespace xpu::engine {
namespace {

constexpr uint64_t kSec = 1000000000ull;

class RegistryTest : public ::testing::Test {
 protected:
  std::atomic<uint64_t> now_{1000 * kSec};
  Registry reg_{[this] { return now_.load(); }, 30 * kSec, 1024};

  // Feeds one batch for (job, rank) the way the ingest service does.
  void Feed(const std::string& job, int rank, const std::string& host, int pid, size_t n,
            bool exited = false) {
    xpu::v1::ProcessBatch pb;
    SetIdentity(&pb, job, rank, host, pid);
    *pb.add_signatures() = MakeKernelSignature(1, "k");
    std::vector<xpu_record_v1> recs;
    for (size_t i = 0; i < n; ++i) recs.push_back(MakeRecord(1, now_ + i, 10, i));
    AppendRecords(&pb, recs);
    pb.set_exited(exited);
    auto j = reg_.GetOrCreateJob(job, "");
    std::lock_guard<std::mutex> l(j->mu());
    ProcessState& p = j->GetOrCreateProcess(pb.identity(), "d1", reg_.Now());
    std::vector<xpu_record_v1> out;
    DecodeStats st;
    ASSERT_TRUE(DecodeProcessBatch(pb, p.sigs, &out, &st).ok());
    j->ApplyRecords(p, out.data(), out.size(), reg_.Now());
    j->ApplyCounters(p, pb, reg_.Now());
  }
  Liveness Of(const std::string& job, const std::string& key) {
    auto j = reg_.FindJob(job);
    std::lock_guard<std::mutex> l(j->mu());
    return j->processes().at(key)->liveness;
  }
};

TEST_F(RegistryTest, RankSilentAfterTimeoutAndBackAliveOnRecords) {
  Feed("j", 0, "h0", 10, 5);
  Feed("j", 1, "h1", 11, 5);
  now_ += 20 * kSec;
  Feed("j", 1, "h1", 11, 5);
  now_ += 15 * kSec;  // rank 0: 35 s silent, rank 1: 15 s
  reg_.UpdateLiveness();
  EXPECT_EQ(Of("j", "rank:0"), Liveness::kSilent);
  EXPECT_EQ(Of("j", "rank:1"), Liveness::kAlive);
  auto sums = reg_.JobSummaries(false);
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].ranks, 2u);
  EXPECT_EQ(sums[0].ranks_alive, 1u);
  EXPECT_EQ(sums[0].state, "running");
  EXPECT_EQ(sums[0].records, 15u);

  Feed("j", 0, "h0", 10, 1);
  EXPECT_EQ(Of("j", "rank:0"), Liveness::kAlive);
}

TEST_F(RegistryTest, SilentAsFarAsItsOpenStreamWasRead) {
  Feed("j", 0, "h0", 10, 5);
  Feed("j", 1, "h1", 11, 5);
  auto open = std::make_shared<std::atomic<bool>>(true);
  {
    auto j = reg_.FindJob("j");
    std::lock_guard<std::mutex> l(j->mu());
    for (auto& [key, p] : j->processes()) p->stream_open = open;
  }
  // Rank 1's daemon keeps sending it, without records; rank 0's batches
  // stop arriving while its stream stays open (an ingest backlog).
  for (int i = 0; i < 40; ++i) {
    now_ += kSec;
    auto j = reg_.FindJob("j");
    std::lock_guard<std::mutex> l(j->mu());
    j->processes().at("rank:1")->NoteBatch(now_);
  }
  reg_.UpdateLiveness();
  EXPECT_EQ(Of("j", "rank:0"), Liveness::kAlive) << "40 s unread is the engine's backlog";
  EXPECT_EQ(Of("j", "rank:1"), Liveness::kSilent) << "40 s of batches without records";
  open->store(false);  // both streams end: time counts
  reg_.UpdateLiveness();
  EXPECT_EQ(Of("j", "rank:0"), Liveness::kSilent);
}

TEST_F(RegistryTest, CountersKeepTheHangFiguresTheMonitorReads) {
  Feed("j", 0, "h0", 10, 1);
  auto j = reg_.FindJob("j");
  std::lock_guard<std::mutex> l(j->mu());
  ProcessState& p = *j->processes().at("rank:0");
  auto apply = [&](bool suspect, std::vector<uint64_t> pending_since) {
    xpu::v1::ProcessBatch pb;
    xpu::v1::HangProgress* pr = pb.mutable_counters()->mutable_progress();
    for (uint64_t since : pending_since) {
      xpu::v1::CommProgress* c = pr->add_comms();
      c->set_pending_seq(since ? 7 : 0);
      c->set_pending_since_ns(since);
    }
    pr->set_suspect(suspect);
    pr->set_suspect_since_ns(suspect ? 5 * kSec : 0);
    j->ApplyCounters(p, pb, reg_.Now());
  };
  apply(true, {900 * kSec, 0, 800 * kSec, 950 * kSec});
  EXPECT_TRUE(p.hang_suspect);
  EXPECT_EQ(p.hang_suspect_since_ns, 5 * kSec);
  EXPECT_EQ(p.oldest_pending_ns, 800 * kSec) << "the oldest of the communicators' waits";
  // A batch without counters changes nothing; the next counters replace them.
  j->ApplyCounters(p, xpu::v1::ProcessBatch(), reg_.Now());
  EXPECT_EQ(p.oldest_pending_ns, 800 * kSec);
  apply(false, {0});
  EXPECT_FALSE(p.hang_suspect);
  EXPECT_EQ(p.hang_suspect_since_ns, 0u);
  EXPECT_EQ(p.oldest_pending_ns, 0u);
}

TEST_F(RegistryTest, ExitedIsFinalAndFinishesTheJob) {
  Feed("j", 0, "h0", 10, 1);
  Feed("j", 0, "h0", 10, 0, /*exited=*/true);
  now_ += 100 * kSec;
  reg_.UpdateLiveness();
  EXPECT_EQ(Of("j", "rank:0"), Liveness::kExited);
  EXPECT_TRUE(reg_.JobSummaries(false).empty()) << "finished jobs only with include_finished";
  auto all = reg_.JobSummaries(true);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].state, "finished");
}

TEST_F(RegistryTest, RetiresFinishedJobsIntoHistory) {
  Feed("done", 0, "h0", 10, 3, /*exited=*/true);
  Feed("live", 0, "h0", 11, 3);
  EXPECT_TRUE(reg_.RetireFinishedJobs(60 * kSec).empty()) << "too recent";
  now_ += 61 * kSec;
  EXPECT_EQ(reg_.RetireFinishedJobs(60 * kSec), std::vector<std::string>{"done"});
  EXPECT_EQ(reg_.FindJob("done"), nullptr);
  EXPECT_NE(reg_.FindJob("live"), nullptr) << "silent is not finished";
  auto all = reg_.JobSummaries(true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].job, "done");
  EXPECT_EQ(all[0].records, 3u);
  EXPECT_EQ(all[0].state, "finished");
}

TEST_F(RegistryTest, SummariesDoNotWaitForAJobBeingAnalysed) {
  Feed("j", 0, "h0", 10, 4);
  Feed("j", 1, "h1", 11, 4);
  reg_.UpdateLiveness();  // the start of a window's analysis
  std::shared_ptr<JobState> job = reg_.FindJob("j");
  std::promise<void> held, release;
  std::thread analysis([&] {
    std::lock_guard<std::mutex> l(job->mu());
    held.set_value();
    release.get_future().wait();
  });
  held.get_future().wait();
  // The job is locked by the analysis: its summary of the liveness pass.
  auto sums = reg_.JobSummaries(false);
  release.set_value();
  analysis.join();
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].ranks, 2u);
  EXPECT_EQ(sums[0].ranks_alive, 2u);
  EXPECT_EQ(sums[0].records, 8u);
  Feed("j", 0, "h0", 10, 1);
  EXPECT_EQ(reg_.JobSummaries(false)[0].records, 9u) << "free again: current figures";
}

TEST_F(RegistryTest, RanklessProcessesKeyedByPidAtHost) {
  Feed("solo", -1, "hA", 42, 3);
  Feed("solo", -1, "hB", 42, 3);
  auto j = reg_.FindJob("solo");
  std::lock_guard<std::mutex> l(j->mu());
  EXPECT_EQ(j->processes().size(), 2u);
  EXPECT_EQ(j->processes().count("pid:42@hA"), 1u);
}

TEST_F(RegistryTest, RestartedRankResetsSignatures) {
  Feed("j", 0, "h0", 10, 1);
  xpu::v1::ProcessBatch pb;
  SetIdentity(&pb, "j", 0, "h0", 99);  // new pid, no signatures resent yet
  auto j = reg_.FindJob("j");
  std::lock_guard<std::mutex> l(j->mu());
  ProcessState& p = j->GetOrCreateProcess(pb.identity(), "d1", reg_.Now());
  EXPECT_EQ(p.sigs.size(), 0u);
  EXPECT_EQ(p.identity.pid(), 99);
}

TEST_F(RegistryTest, DaemonLiveness) {
  reg_.DaemonConnected("d1", "h0", "v");
  reg_.DaemonConnected("d2", "h1", "v");
  EXPECT_EQ(reg_.DaemonsConnected(), 2u);
  now_ += 31 * kSec;
  reg_.DaemonSeen("d2", 1, 100, 7);
  reg_.UpdateLiveness();
  auto ds = reg_.Daemons();
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].silent);
  EXPECT_FALSE(ds[1].silent);
  EXPECT_EQ(ds[1].records, 100u);
  EXPECT_EQ(ds[1].records_dropped, 7u);
  reg_.DaemonDisconnected("d1");
  EXPECT_EQ(reg_.DaemonsConnected(), 1u);
}

TEST_F(RegistryTest, HistoricalJobsShownAsFinishedUnlessLive) {
  JobSummary old;
  old.job = "old";
  old.state = "running";  // engine died while it ran
  old.first_seen_ns = 1;
  reg_.AddHistoricalJob(old);
  JobSummary again = old;
  again.job = "j";
  reg_.AddHistoricalJob(again);
  Feed("j", 0, "h0", 10, 1);
  auto all = reg_.JobSummaries(true);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].job, "old");
  EXPECT_EQ(all[0].state, "finished");
  EXPECT_EQ(all[1].job, "j");
  EXPECT_EQ(all[1].state, "running");
}

TEST_F(RegistryTest, RankLivenessDetectorReportsSilentRanks) {
  Feed("j", 0, "h0", 10, 1);
  Feed("j", 1, "h1", 11, 1);
  RankLivenessDetector det(reg_.silent_after_ns());
  auto j = reg_.FindJob("j");
  VectorSink sink;
  {
    std::lock_guard<std::mutex> l(j->mu());
    j->CloseWindow(reg_.Now());
    det.OnWindow(*j, sink);
  }
  EXPECT_TRUE(sink.out.empty());
  now_ += 40 * kSec;
  Feed("j", 1, "h1", 11, 1);
  reg_.UpdateLiveness();
  {
    std::lock_guard<std::mutex> l(j->mu());
    j->CloseWindow(reg_.Now());
    det.OnWindow(*j, sink);
  }
  ASSERT_EQ(sink.out.size(), 1u);
  const Diagnosis& d = sink.out[0];
  EXPECT_EQ(d.kind, "rank_silent");
  EXPECT_EQ(d.ranks, std::vector<int32_t>{0});
  EXPECT_EQ(d.hosts, std::vector<std::string>{"h0"});
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.team, Team::kOperations);
  EXPECT_NE(d.evidence.find("40 s"), std::string::npos) << d.evidence;
  EXPECT_EQ(d.last_seen_ns, now_.load());
}

TEST_F(RegistryTest, ConcurrentDaemonsAndJobs) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (int i = 0; i < 200; ++i) {
        Feed("job" + std::to_string(i % 3), t, "h" + std::to_string(t), 100 + t, 4);
        if (i % 50 == 0) reg_.UpdateLiveness();
      }
    });
  }
  for (auto& th : threads) th.join();
  uint64_t total = 0;
  for (const auto& s : reg_.JobSummaries(true)) total += s.records;
  EXPECT_EQ(total, 4u * 200u * 4u);
}

}  // namespace
}  // namespace xpu::engine
