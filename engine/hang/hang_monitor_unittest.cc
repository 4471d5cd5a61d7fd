// engine/hang/hang_monitor_unittest.cc — suspicion, the evidence fan-out and
// the verdict, with an injected clock and a fake daemon answering the
// "evidence" command.
#include <gtest/gtest.h>

#include <future>

#include "engine/hang/hang_detector.h"
#include "engine/hang/hang_monitor.h"
#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

constexpr uint64_t kS = 1000000000ull;

class HangMonitorTest : public ::testing::Test {
 protected:
  HangMonitorTest() : registry_([this] { return now_; }, 30 * kS, 1024) {}

  // Four ranks on one daemon; rank 2 never issued seq 7.
  void Populate(bool suspect) {
    auto job = registry_.GetOrCreateJob("j", "");
    std::lock_guard<std::mutex> l(job->mu());
    for (int r = 0; r < 4; ++r) {
      xpu::v1::ProcessIdentity id;
      id.set_job("j");
      id.set_rank(r);
      id.set_host("node");
      id.set_pid(100 + r);
      ProcessState& p = job->GetOrCreateProcess(id, "d1", now_);
      xpu::v1::ProcessBatch pb;
      xpu::v1::HangProgress* pr = pb.mutable_counters()->mutable_progress();
      xpu::v1::CommProgress* c = pr->add_comms();
      c->set_comm_id(9);
      c->set_last_issued_seq(r == 2 ? 6 : 8);
      c->set_last_completed_seq(6);
      c->set_pending_seq(r == 2 ? 0 : 7);
      c->set_pending_kind(r == 2 ? 0 : XPU_OP_ALLREDUCE);
      c->set_pending_bytes(r == 2 ? 0 : 4096);
      c->set_pending_since_ns(r == 2 ? 0 : now_ - 11 * kS);
      if (suspect && r != 2) {
        pr->set_suspect(true);
        pr->set_suspect_seq(7);
        pr->set_suspect_since_ns(now_ - 11 * kS);
        pr->set_suspect_name("ncclAllReduce");
      }
      job->ApplyCounters(p, pb, now_);
    }
  }

  // The daemon: every process sleeping, rank 2 in `busy_loop`.
  CommandFuture Answer(const std::string& daemon, const xpu::v1::Command& c) {
    ++commands_;
    modes_.push_back(c.evidence_mode());
    EXPECT_EQ(daemon, "d1");
    EXPECT_EQ(c.kind(), "evidence");
    EXPECT_EQ(c.job(), "j");
    xpu::v1::EvidenceReply ev;
    ev.set_host("node");
    for (int r = 0; r < 4; ++r) {
      xpu::v1::ProcessEvidence* p = ev.add_processes();
      p->mutable_identity()->set_rank(r);
      p->mutable_identity()->set_host("node");
      p->mutable_identity()->set_pid(100 + r);
      p->set_proc_state(r == 2 ? "running" : "sleeping");
      p->set_native_stacks(
          r == 2 ? "Thread 1 (LWP 102):\n#0  busy_loop () at x.cc:1\n#1  main () at x.cc:2\n"
                 : "Thread 1 (LWP 10):\n#0  nanosleep ()\n#1  cudaStreamSynchronize ()\n"
                   "#2  main ()\n");
    }
    xpu::v1::CommandReply reply;
    reply.set_ok(true);
    reply.set_payload(ev.SerializeAsString());
    std::promise<absl::StatusOr<xpu::v1::CommandReply>> pr;
    pr.set_value(reply);
    return pr.get_future();
  }

  // A daemon that never answers the evidence command.
  static EvidenceSender NoAnswer(std::string why) {
    return [why](const std::string&, xpu::v1::Command) {
      std::promise<absl::StatusOr<xpu::v1::CommandReply>> pr;
      pr.set_value(absl::UnavailableError(why));
      return pr.get_future();
    };
  }

  HangMonitorOptions Options() {
    HangMonitorOptions o;
    o.evidence_deadline_ms = 1000;
    return o;
  }

  uint64_t now_ = 1000 * kS;
  Registry registry_;
  int commands_ = 0;
  std::vector<std::string> modes_;
};

TEST_F(HangMonitorTest, NoSuspicionNoCommand) {
  Populate(false);
  HangMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  m.Poll();
  EXPECT_EQ(commands_, 0);
  EXPECT_FALSE(m.Latest("j").has_value());
  EXPECT_FALSE(m.ActiveDiagnosis("j").has_value());
}

// Records of progress that arrive while the verdict is formed (a rank whose
// checkpoint just ended runs on): the fault verdict is not reported, and
// the job is looked at again a second later, when a hang that lasts is.
TEST_F(HangMonitorTest, AVerdictFormedWhileTheJobMovesIsNotReported) {
  Populate(true);
  std::shared_ptr<JobState> job = registry_.FindJob("j");
  bool move = true;
  HangMonitor m(
      registry_,
      [&](const std::string& d, xpu::v1::Command c) {
        if (move) {
          std::lock_guard<std::mutex> l(job->mu());
          for (const auto& [key, p] : job->processes()) {
            if (p->identity.rank() != 2) continue;
            SignatureInfo gemm;
            gemm.abi.kind = XPU_OP_GEMM;
            p->sigs.Define(1, gemm);
            xpu_record_v1 rec{};
            rec.sig_id = 1;
            rec.start_ns = now_ - kS;
            rec.flags = XPU_REC_TIMED;
            job->ApplyRecords(*p, &rec, 1, now_);
          }
        }
        return Answer(d, c);
      },
      Options());
  std::vector<Diagnosis> heard;
  m.SetListener([&](const Diagnosis& d) { heard.push_back(d); });
  m.Poll();
  m.WaitIdle();
  EXPECT_EQ(modes_, std::vector<std::string>({"quick"})) << "no full pass of a moving job";
  EXPECT_FALSE(m.Latest("j").has_value());
  EXPECT_TRUE(heard.empty());

  // Nothing moves any more. A second later rank 2's progress is recent:
  // busy, not a fault; once it is older than the job's threshold, the hang
  // is reported.
  move = false;
  now_ += 1 * kS;
  m.Poll();
  m.WaitIdle();
  ASSERT_TRUE(m.Latest("j").has_value());
  EXPECT_EQ(m.Latest("j")->verdict.cls, HangClass::kBusyWait);
  now_ += 60 * kS;
  m.Poll();
  m.WaitIdle();
  EXPECT_EQ(m.Latest("j")->verdict.cls, HangClass::kNonCommunication);
  ASSERT_FALSE(heard.empty());
  EXPECT_EQ(heard.back().kind, "hang_non_communication");
}

TEST(HangPollWaitTest, SlowPassesStretchTheWaitToKeepTheirShare) {
  using std::chrono::milliseconds;
  EXPECT_EQ(PollWait(500, 0), milliseconds(500));
  EXPECT_EQ(PollWait(500, 20 * 1000000ull), milliseconds(500)) << "20 ms passes: 4 % of 500 ms";
  EXPECT_EQ(PollWait(500, 100 * 1000000ull), milliseconds(100 * kPollCostShare))
      << "a 100k-rank job's pass of 100 ms";
  EXPECT_EQ(PollWait(500, 1000 * 1000000ull), milliseconds(kMaxPollWaitMs))
      << "never longer than kMaxPollWaitMs";
  EXPECT_EQ(PollWait(5000, 1000 * 1000000ull), milliseconds(5000)) << "nor shorter than poll_ms";
}

TEST_F(HangMonitorTest, SuspicionCollectsEvidenceAndNamesTheCulprit) {
  Populate(true);
  HangMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  std::vector<Diagnosis> heard;
  m.SetListener([&](const Diagnosis& d) { heard.push_back(d); });
  m.Poll();
  m.WaitIdle();
  // A quick pass, then the full one.
  EXPECT_EQ(modes_, std::vector<std::string>({"quick", ""}));
  std::optional<HangReport> r = m.Latest("j");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->verdict.cls, HangClass::kNonCommunication);
  EXPECT_EQ(r->verdict.culprits, std::vector<int32_t>({2}));
  EXPECT_EQ(r->daemons_answered, 1u);
  EXPECT_EQ(r->stall_since_ns, now_ - 11 * kS);
  EXPECT_NE(r->tree.Text().find("busy_loop  [ranks 2 | not 0-1,3]"), std::string::npos)
      << r->tree.Text();
  EXPECT_NE(r->Json().find("\"classification\":\"non-communication\""), std::string::npos);
  EXPECT_EQ(r->phase, "full");
  EXPECT_GT(r->refined_ns, 0u);
  ASSERT_GE(heard.size(), 1u);
  EXPECT_EQ(heard[0].kind, "hang_non_communication");
  EXPECT_EQ(heard[0].team, Team::kAlgorithm);
  EXPECT_EQ(heard[0].severity, Severity::kCritical);
  EXPECT_EQ(heard[0].ranks, std::vector<int32_t>({2}));
  // The refined verdict adds where rank 2 sits (its native frames).
  EXPECT_NE(heard.back().evidence.find("stuck in native code at main > busy_loop"),
            std::string::npos)
      << heard.back().evidence;
  // Once per episode: a second poll does not ask again.
  m.Poll();
  m.WaitIdle();
  EXPECT_EQ(commands_, 2);
  // The detector adapter hands the active diagnosis to the window tick.
  HangDetector det(&m);
  VectorSink sink;
  auto job = registry_.FindJob("j");
  {
    std::lock_guard<std::mutex> l(job->mu());
    det.OnWindow(*job, sink);
  }
  ASSERT_EQ(sink.out.size(), 1u);
  EXPECT_EQ(sink.out[0].ranks, std::vector<int32_t>({2}));
  // Recovery ends the episode.
  Populate(false);
  m.Poll();
  EXPECT_FALSE(m.ActiveDiagnosis("j").has_value());
  EXPECT_TRUE(m.Latest("j").has_value());  // the last report stays readable
}

TEST_F(HangMonitorTest, UnansweredDaemonStillGivesAVerdictFromEngineState) {
  Populate(true);
  HangMonitor m(registry_, NoAnswer("daemon gone"), Options());
  m.Poll();
  m.WaitIdle();
  std::optional<HangReport> r = m.Latest("j");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->daemons_answered, 0u);
  EXPECT_EQ(r->verdict.culprits, std::vector<int32_t>({2}));  // from the progress tables alone
}

TEST_F(HangMonitorTest, NoCulpritFromATableTheEngineIsBehindOnUntilItIsRead) {
  Populate(true);
  auto job = registry_.FindJob("j");
  auto open = std::make_shared<std::atomic<bool>>(true);
  // Every daemon stream stays open; rank 2's batches wait unread for 5 s
  // (an ingest backlog) while the others' keep coming.
  auto read_all_but = [&](int32_t skip) {
    std::lock_guard<std::mutex> l(job->mu());
    for (auto& [key, p] : job->processes()) {
      p->stream_open = open;
      if (p->identity.rank() != skip) p->NoteBatch(now_);
    }
  };
  now_ += 5 * kS;
  read_all_but(2);
  HangMonitor m(registry_, NoAnswer("daemon busy"), Options());
  m.Poll();
  m.WaitIdle();
  std::optional<HangReport> r = m.Latest("j");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->verdict.cls, HangClass::kNone);
  EXPECT_TRUE(r->verdict.evidence_behind) << r->verdict.reason;
  EXPECT_FALSE(m.ActiveDiagnosis("j").has_value()) << "no culprit named from an unread table";
  // Rank 2's batches are read (it still has not issued seq 7): the next
  // look, a second later, names it.
  now_ += 2 * kS;
  read_all_but(-1);
  m.Poll();
  m.WaitIdle();
  r = m.Latest("j");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->verdict.cls, HangClass::kNonCommunication);
  EXPECT_EQ(r->verdict.culprits, std::vector<int32_t>({2}));
  ASSERT_TRUE(m.ActiveDiagnosis("j").has_value());
  EXPECT_EQ(m.ActiveDiagnosis("j")->ranks, std::vector<int32_t>({2}));
}

TEST_F(HangMonitorTest, CollectNowNeedsALiveJob) {
  HangMonitor m(
      registry_, [this](const std::string& d, xpu::v1::Command c) { return Answer(d, c); },
      Options());
  EXPECT_FALSE(m.CollectNow("nope", 100).ok());
  Populate(false);
  absl::StatusOr<HangReport> r = m.CollectNow("j", 100);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->on_demand);
  EXPECT_EQ(r->tree.all_ranks().size(), 4u);
}

// A one-process job: no collective waits, nothing is overdue in the hook;
// only its progress stops. The first verdict comes from the quick pass,
// before the full one (held back here) answers.
TEST_F(HangMonitorTest, OneProcessWithoutProgressIsAHangNamedFromItsPythonStack) {
  auto job = registry_.GetOrCreateJob("solo", "");
  {
    std::lock_guard<std::mutex> l(job->mu());
    xpu::v1::ProcessIdentity id;
    id.set_job("solo");
    id.set_rank(0);
    id.set_host("node");
    id.set_pid(500);
    job->GetOrCreateProcess(id, "d1", now_).last_progress_rx_ns = now_;
  }
  std::promise<absl::StatusOr<xpu::v1::CommandReply>> full;
  std::shared_future<absl::StatusOr<xpu::v1::CommandReply>> full_f = full.get_future().share();
  HangMonitor m(
      registry_,
      [&](const std::string&, xpu::v1::Command c) -> CommandFuture {
        modes_.push_back(c.evidence_mode());
        if (c.evidence_mode() != "quick") {
          return std::async(std::launch::async, [full_f] { return full_f.get(); });
        }
        xpu::v1::EvidenceReply ev;
        xpu::v1::ProcessEvidence* p = ev.add_processes();
        p->mutable_identity()->set_rank(0);
        p->mutable_identity()->set_host("node");
        p->mutable_identity()->set_pid(500);
        p->set_proc_state("sleeping");
        p->set_python_stacks(
            "Current thread 0x00007f (most recent call first):\n"
            "  File \"train.py\", line 9 in wait_forever\n"
            "  File \"train.py\", line 20 in train\n"
            "  File \"train.py\", line 30 in <module>\n");
        xpu::v1::CommandReply reply;
        reply.set_ok(true);
        reply.set_payload(ev.SerializeAsString());
        std::promise<absl::StatusOr<xpu::v1::CommandReply>> pr;
        pr.set_value(reply);
        return pr.get_future();
      },
      Options());
  m.Poll();  // healthy: no progress missed yet
  EXPECT_FALSE(m.Latest("solo").has_value());
  now_ += 7 * kS;
  m.Poll();
  std::optional<Diagnosis> d = m.ActiveDiagnosis("solo");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, "hang_non_communication");
  EXPECT_EQ(d->team, Team::kAlgorithm);
  EXPECT_EQ(d->ranks, std::vector<int32_t>({0}));
  EXPECT_NE(d->evidence.find("stuck in Python at"), std::string::npos) << d->evidence;
  EXPECT_NE(d->evidence.find("wait_forever (train.py)"), std::string::npos) << d->evidence;
  std::optional<HangReport> r = m.Latest("solo");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->phase, "quick");
  EXPECT_EQ(r->refined_ns, 0u);
  EXPECT_EQ(r->stall_since_ns, now_ - 7 * kS);
  EXPECT_NE(r->trigger.find("made no progress for 7.00 s"), std::string::npos) << r->trigger;
  // The full pass answers (no native stacks from it): the verdict stands.
  xpu::v1::CommandReply empty;
  empty.set_ok(true);
  empty.set_payload(xpu::v1::EvidenceReply().SerializeAsString());
  full.set_value(empty);
  m.WaitIdle();
  r = m.Latest("solo");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->phase, "full");
  EXPECT_EQ(r->verdict.culprits, std::vector<int32_t>({0}));
  // Progress again: the episode ends.
  {
    std::lock_guard<std::mutex> l(job->mu());
    for (const auto& [key, p] : job->processes()) p->last_progress_rx_ns = now_;
  }
  m.Poll();
  EXPECT_FALSE(m.ActiveDiagnosis("solo").has_value());
}

}  // namespace
}  // namespace xpu::engine::hang
