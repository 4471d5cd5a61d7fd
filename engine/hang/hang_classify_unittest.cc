// engine/hang/hang_classify_unittest.cc — the verdict rules on synthetic
// 8-rank evidence, one test per hang pattern.
#include <gtest/gtest.h>

#include "engine/hang/classify.h"
#include "engine/hang/stall_site.h"
#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

constexpr uint64_t kComm = 0xc0ffee;

ThreadStack Stack(std::vector<std::string> frames) {
  ThreadStack t;
  t.frames = std::move(frames);
  return t;
}

// Eight healthy ranks that issued collectives 1..12 and wait in seq 10.
std::vector<RankEvidence> Waiting(int n = 8) {
  std::vector<RankEvidence> out;
  for (int r = 0; r < n; ++r) {
    RankEvidence e;
    e.rank = r;
    e.host = r < 4 ? "node-a" : "node-b";
    e.pid = 1000 + r;
    e.proc_state = "sleeping";
    e.has_progress = true;
    CommState c;
    c.comm_id = kComm;
    c.last_issued = 12;
    c.last_completed = 9;
    c.pending_seq = 10;
    c.pending_kind = XPU_OP_ALLREDUCE;
    c.pending_bytes = 1 << 20;
    c.comm_rank = r;
    c.comm_nranks = n;
    e.comms.push_back(c);
    e.native.push_back(Stack({"main", "Step", "cudaStreamSynchronize", "nanosleep"}));
    out.push_back(e);
  }
  return out;
}

// Rank `r` stopped issuing before seq 10 and sits in `frame`.
void Idle(RankEvidence& e, const std::string& frame) {
  e.comms[0].last_issued = 9;
  e.comms[0].pending_seq = 0;
  e.comms[0].pending_kind = 0;
  e.native = {Stack({"main", frame})};
}

TEST(ClassifyTest, RankThatNeverIssuedIsANonCommunicationCulprit) {
  auto ranks = Waiting();
  Idle(ranks[5], "fake_spin_forever");
  ranks[5].proc_state = "running";
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({5}));
  EXPECT_EQ(v.hosts, std::vector<std::string>({"node-b"}));
  EXPECT_EQ(v.stuck_seq, 10u);
  EXPECT_NE(v.reason.find("never issued collective seq 10"), std::string::npos) << v.reason;
}

TEST(ClassifyTest, ARankTheEngineIsBehindOnIsNotNamedForNeverIssuing) {
  // Ranks 2 and 5 seem not to have issued seq 10; their daemons did not
  // answer and the engine has not read all they sent of rank 2.
  auto ranks = Waiting();
  for (int r : {2, 5}) {
    Idle(ranks[r], "unknown");
    ranks[r].answered = false;
    ranks[r].native.clear();
  }
  ranks[2].table_behind = true;
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({5}));
  bool said = false;
  for (const std::string& d : v.details) said |= d.find("rank(s) 2 had not issued") == 0;
  EXPECT_TRUE(said) << "the rank left out is said";
  // Behind on both: no culprit yet, and the monitor is told to look again.
  ranks[5].table_behind = true;
  v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNone);
  EXPECT_TRUE(v.evidence_behind);
  EXPECT_TRUE(v.culprits.empty());
  EXPECT_EQ(v.stuck_seq, 10u);
  EXPECT_NE(v.reason.find("no culprit named until it has"), std::string::npos) << v.reason;
}

TEST(ClassifyTest, StoppedProcessIsForOperations) {
  auto ranks = Waiting();
  ranks[2].proc_state = "stopped";
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "operations");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({2}));
  ranks[2].proc_state = "disk-sleep";
  EXPECT_EQ(Classify(ranks).team, "operations");
}

TEST(ClassifyTest, ExitedRankIsACrash) {
  auto ranks = Waiting();
  ranks[7].exited = true;
  ranks[7].proc_state = "gone";
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kCrash);
  EXPECT_EQ(v.team, "operations");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({7}));
}

TEST(ClassifyTest, CheckpointingRankIsABusyWaitNotAFault) {
  auto ranks = Waiting();
  Idle(ranks[0], "fake_save_checkpoint");
  ranks[0].open.push_back(OpenInterval{XPU_OP_PY_CHECKPOINT, "checkpoint.save", 123});
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kBusyWait);
  EXPECT_EQ(v.team, "");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0}));
  EXPECT_NE(v.reason.find("busy rank(s) 0"), std::string::npos);
  // The same rank without an open interval is a hang.
  ranks[0].open.clear();
  EXPECT_EQ(Classify(ranks).cls, HangClass::kNonCommunication);
}

TEST(ClassifyTest, DifferentOpAtTheSameSeqIsAMismatch) {
  auto ranks = Waiting();
  ranks[6].comms[0].pending_kind = XPU_OP_ALLGATHER;
  ranks[6].comms[0].last_issued = 13;
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kMismatch);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({6}));
  // A size difference is a mismatch too.
  ranks = Waiting();
  ranks[1].comms[0].pending_bytes = 4096;
  ranks[2].comms[0].pending_bytes = 4096;
  v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kMismatch);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1, 2}));
}

// Two ranks, one shape each (no majority): the job's own per-step pattern
// decides, not how many collectives each rank issued (the healthy rank may
// have enqueued further ahead).
TEST(ClassifyTest, TwoRankMismatchIsDecidedByTheStepPattern) {
  auto ranks = Waiting(2);
  ranks[1].comms[0].pending_bytes = 4096;  // rank 1 added a small all-reduce
  ranks[0].comms[0].last_issued = 14;      // rank 0 ran ahead asynchronously
  ranks[1].comms[0].last_issued = 10;
  // Without history nothing tells them apart: both are named, and said so.
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kMismatch);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0, 1}));
  EXPECT_NE(v.reason.find("cannot be told apart"), std::string::npos) << v.reason;
  // Steps of 3 collectives (all-reduce 1 MiB, all-gather, all-reduce 1 MiB)
  // completed up to seq 9: seq 10 is the step's first all-reduce of 1 MiB.
  ClassifyContext ctx;
  for (uint32_t s = 1; s <= 9; ++s) {
    ctx.completed[kComm][s] = (s % 3 == 2) ? std::make_pair(uint32_t{XPU_OP_ALLGATHER}, uint64_t{8192})
                                           : std::make_pair(uint32_t{XPU_OP_ALLREDUCE}, uint64_t{1} << 20);
  }
  v = Classify(ranks, ctx);
  EXPECT_EQ(v.cls, HangClass::kMismatch);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1}));
  EXPECT_NE(v.reason.find("per-step pattern expects (allreduce of 1048576 bytes)"),
            std::string::npos)
      << v.reason;
  // The other way round: rank 0 issued the odd one, though it issued more.
  std::swap(ranks[0].comms[0].pending_bytes, ranks[1].comms[0].pending_bytes);
  v = Classify(ranks, ctx);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0}));
  // A history without a repeating pattern does not decide.
  ClassifyContext noisy;
  for (uint32_t s = 1; s <= 9; ++s) noisy.completed[kComm][s] = {XPU_OP_ALLREDUCE, s * 100};
  v = Classify(ranks, noisy);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0, 1}));
}

// A job with no collectives waiting: one process, or every rank stuck
// outside collectives.
std::vector<RankEvidence> Alone(int n = 1) {
  std::vector<RankEvidence> out;
  for (int r = 0; r < n; ++r) {
    RankEvidence e;
    e.rank = r;
    e.host = "node-a";
    e.pid = 2000 + r;
    e.proc_state = "sleeping";
    e.has_progress = true;
    e.progress_age_ns = 7000000000;
    CommState c;
    c.comm_id = kComm;
    c.last_issued = c.last_completed = 40;
    e.comms.push_back(c);
    out.push_back(e);
  }
  return out;
}

ThreadStack Python(std::vector<std::string> frames) {
  ThreadStack t = Stack(std::move(frames));
  t.python = true;
  t.thread = "\"MainThread\"";
  return t;
}

TEST(ClassifyTest, OneProcessStoppedIsForOperations) {
  auto ranks = Alone();
  ranks[0].proc_state = "stopped";
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "operations");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0}));
  EXPECT_NE(v.reason.find("no rank makes progress"), std::string::npos) << v.reason;
}

TEST(ClassifyTest, OneProcessStuckInPythonOrDataLoadingIsForAlgorithmWithTheFrame) {
  auto ranks = Alone();
  ranks[0].python = {Python({"<module> (train.py)", "train (train.py)", "wait_forever (train.py)"})};
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0}));
  EXPECT_NE(v.reason.find("stuck in Python at <module> (train.py) > train (train.py) > "
                          "wait_forever (train.py)"),
            std::string::npos)
      << v.reason;
  ranks[0].python = {Python({"<module> (train.py)", "train (train.py)", "__next__ (dataloader.py)",
                             "_next_data (dataloader.py)", "get (queues.py)", "wait (threading.py)"})};
  v = Classify(ranks);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_NE(v.reason.find("(data loading)"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("stuck in data loading at"), std::string::npos) << v.reason;
  // Native frames only (no Python side): where it spins.
  ranks[0].python.clear();
  ranks[0].native = {Stack({"main", "Step", "fake_spin_forever"})};
  ranks[0].threads = "2000 train running -\n2001 worker sleeping futex_wait_queue\n";
  ranks[0].cpu_busy = 0.98;
  v = Classify(ranks);
  EXPECT_EQ(v.team, "algorithm");
  EXPECT_NE(v.reason.find("stuck in native code at main > Step > fake_spin_forever, main thread "
                          "running, 0.98 CPU (spinning)"),
            std::string::npos)
      << v.reason;
}

TEST(ClassifyTest, EveryRankStuckOutsideCollectivesIsNamedTogether) {
  auto ranks = Alone(4);
  for (auto& r : ranks) r.python = {Python({"<module> (train.py)", "wait_forever (train.py)"})};
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0, 1, 2, 3}));
  EXPECT_NE(v.reason.find("rank(s) 0-3 stuck in Python at"), std::string::npos) << v.reason;
  // A rank that still makes progress is not stuck.
  ranks[2].progressing = true;
  v = Classify(ranks);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0, 1, 3}));
}

TEST(ClassifyTest, AKernelThatNeverCompletesIsNamedWithItsStream) {
  auto ranks = Alone();
  ranks[0].overdue.set = true;
  ranks[0].overdue.kind = XPU_OP_KERNEL;
  ranks[0].overdue.seq = 812;
  ranks[0].overdue.stream = 2;
  ranks[0].overdue.name = "xpu_fake_kernel";
  ranks[0].overdue.since_ns = 100000000000;
  ClassifyContext ctx;
  ctx.now_ns = 107000000000;
  Verdict v = Classify(ranks, ctx);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.team, "operations");
  EXPECT_NE(v.reason.find("GPU kernel xpu_fake_kernel (#812 on stream 2) never completes: "
                          "outstanding for 7.0 s"),
            std::string::npos)
      << v.reason;
  // An overdue collective is not a stuck kernel.
  ranks[0].overdue.kind = XPU_OP_ALLREDUCE;
  ranks[0].overdue.comm_id = kComm;
  EXPECT_NE(Classify(ranks, ctx).team, "operations");
}

// The catalogue's python2 on the GPU-less runtime: rank 1 sits in Python
// before collective seq 31; rank 0 issued its GEMMs, then seq 31, and waits
// in it. The hook cannot mark the last GEMMs complete (their completion mark
// is queued behind the collective), so rank 0's overdue op is a GEMM issued
// before the collective. Not a stuck kernel: the hang is rank 1's.
std::vector<RankEvidence> GemmMarkBehindCollective() {
  auto ranks = Waiting(2);
  for (RankEvidence& e : ranks) {
    e.comms[0].last_completed = 30;
    e.comms[0].last_issued = 31;
    e.comms[0].pending_seq = 31;
    e.comms[0].pending_since_ns = 100500000000;
  }
  ranks[0].overdue.set = true;
  ranks[0].overdue.kind = XPU_OP_GEMM;
  ranks[0].overdue.seq = 152;
  ranks[0].overdue.stream = 0;
  ranks[0].overdue.name = "cublasSgemm_v2";
  ranks[0].overdue.since_ns = 100000000000;  // before the collective
  ranks[0].python.push_back(Stack({"<module> (py_model.py)", "main (py_model.py)",
                                   "train_step (py_model.py)"}));
  Idle(ranks[1], "clock_nanosleep");
  ranks[1].comms[0].last_issued = 30;
  ranks[1].python.push_back(Stack({"<module> (py_model.py)", "main (py_model.py)",
                                   "load_next_batch (py_model.py)"}));
  return ranks;
}

TEST(ClassifyTest, AKernelWhoseCompletionMarkIsQueuedBehindACollectiveIsNotStuck) {
  ClassifyContext ctx;
  ctx.now_ns = 109000000000;
  // Rank 1 never issued the collective rank 0 waits in.
  auto ranks = GemmMarkBehindCollective();
  Verdict v = Classify(ranks, ctx);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication) << v.reason;
  EXPECT_EQ(v.team, "algorithm") << v.reason;
  EXPECT_EQ(v.culprits, std::vector<int32_t>({1})) << v.reason;
  EXPECT_NE(v.reason.find("rank 1 stuck in Python at"), std::string::npos) << v.reason;
  EXPECT_EQ(v.reason.find("never completes"), std::string::npos) << v.reason;

  // Rank 0 is inside the collective's kernel (ring counters: arrived 31):
  // the GPU ran past the GEMM, whoever the peers are.
  ranks = GemmMarkBehindCollective();
  KernelProgress k;
  k.channel = "fake-nccl-shm:0";
  k.seq = 31;
  k.completed_seq = 30;
  ranks[0].kernel.push_back(k);
  EXPECT_FALSE(HasStuckKernel(ranks[0]));
}

TEST(ClassifyTest, AKernelThatHoldsBackACollectiveEveryPeerIssuedIsStuck) {
  // Rank 0's GEMM never completes and its collective (issued after it, on
  // the same stream) cannot start: every peer issued it and waits in it.
  ClassifyContext ctx;
  ctx.now_ns = 109000000000;
  auto ranks = GemmMarkBehindCollective();
  ranks[1] = Waiting(2)[1];
  ranks[1].comms[0] = ranks[0].comms[0];
  ranks[1].comms[0].comm_rank = 1;
  Verdict v = Classify(ranks, ctx);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication) << v.reason;
  EXPECT_EQ(v.team, "operations") << v.reason;
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0})) << v.reason;
  EXPECT_NE(v.reason.find("GPU kernel cublasSgemm_v2 (#152 on stream 0) never completes"),
            std::string::npos)
      << v.reason;
}

TEST(ClassifyTest, BusyRanksAreNotFaults) {
  // A single process inside a checkpoint save.
  auto ranks = Alone();
  ranks[0].open.push_back(OpenInterval{XPU_OP_PY_CHECKPOINT, "checkpoint.save", 123});
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kBusyWait);
  EXPECT_EQ(v.team, "");
  // One rank evaluates (still completes work) while the others wait.
  ranks = Waiting(4);
  Idle(ranks[0], "evaluate");
  ranks[0].progressing = true;
  ranks[0].progress_age_ns = 300000000;
  v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kBusyWait);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({0}));
}

TEST(ClassifyTest, AllInsideTheKernelIsCommunicationAndTheRingLocatesTheLink) {
  auto ranks = Waiting();
  // Link 3 -> 4 (between the hosts) broken: rank 4 did 0 steps, 5 did 1,
  // ..., 3 did 7.
  for (int r = 0; r < 8; ++r) {
    KernelProgress k;
    k.channel = "seg";
    k.ring_pos = r;
    k.ring_size = 8;
    k.seq = 10;
    k.completed_seq = 9;
    k.step = static_cast<uint64_t>((r - 4 + 8) % 8);
    ranks[static_cast<size_t>(r)].kernel.push_back(k);
  }
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kCommunication);
  EXPECT_EQ(v.team, "operations");  // a located link: network
  EXPECT_EQ(v.faulty_link, "3->4");
  EXPECT_EQ(v.culprits, std::vector<int32_t>({3, 4}));
  EXPECT_EQ(v.hosts, std::vector<std::string>({"node-a", "node-b"}));
  // Without kernel progress every member is listed, the link unknown.
  for (auto& r : ranks) r.kernel.clear();
  v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kCommunication);
  EXPECT_EQ(v.team, "infrastructure");
  EXPECT_EQ(v.culprits.size(), 8u);
  EXPECT_TRUE(v.faulty_link.empty());
}

TEST(ClassifyTest, StacksAloneWithoutProgressTables) {
  auto ranks = Waiting();
  for (auto& r : ranks) {
    r.has_progress = false;
    r.comms.clear();
  }
  ranks[3].native = {Stack({"main", "Step", "pause"})};
  Verdict v = Classify(ranks);
  EXPECT_EQ(v.cls, HangClass::kNonCommunication);
  EXPECT_EQ(v.culprits, std::vector<int32_t>({3}));
}

TEST(ClassifyTest, FindStalledLink) {
  EXPECT_EQ(FindStalledLink({3, 3, 3, 3}), -1);
  EXPECT_EQ(FindStalledLink({2, 3, 0, 1}), 2);  // 3 -> 0 drop at position 2
  EXPECT_EQ(FindStalledLink({0, 1, 2, 3}), 0);  // wraps: 3 -> 0 at position 0
  EXPECT_EQ(FindStalledLink({5}), -1);
}

}  // namespace
}  // namespace xpu::engine::hang
