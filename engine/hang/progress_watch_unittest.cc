// engine/hang/progress_watch_unittest.cc — suspicion from a job's own
// progress: the threshold from its step period, the floor, start-up and
// teardown.
#include "engine/hang/progress_watch.h"

#include <gtest/gtest.h>

#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

constexpr uint64_t kS = 1000000000ull;
constexpr uint64_t kMs = 1000000ull;

class ProgressWatchTest : public ::testing::Test {
 protected:
  ProcessState& Proc(int rank) {
    xpu::v1::ProcessIdentity id;
    id.set_job("j");
    id.set_rank(rank);
    id.set_host("h");
    id.set_pid(100 + rank);
    return job_.GetOrCreateProcess(id, "d", now_);
  }
  // Step markers every `step` ns, `n` of them, ending at `end` (host clock).
  void Steps(ProcessState& p, uint64_t step, int n, uint64_t end) {
    SignatureInfo s;
    s.abi.commit = 1;
    s.abi.kind = XPU_OP_STEP;
    s.name = "step";
    p.sigs.Define(1, s);
    std::vector<xpu_record_v1> recs;
    for (int i = 0; i < n; ++i) {
      xpu_record_v1 r{};
      r.sig_id = 1;
      r.seq = static_cast<uint32_t>(i);
      r.flags = XPU_REC_HOST;
      r.start_ns = end - static_cast<uint64_t>(n - i) * step;
      recs.push_back(r);
    }
    job_.ApplyRecords(p, recs.data(), recs.size(), now_);
  }

  uint64_t now_ = 1000 * kS;
  JobState job_{"j", "", 1 << 14, 1000 * kS};
};

TEST_F(ProgressWatchTest, ProgressRecordsAreCompletionsNotGcOrOpenings) {
  EXPECT_TRUE(IsProgressRecord(XPU_OP_GEMM, XPU_REC_TIMED));
  EXPECT_TRUE(IsProgressRecord(XPU_OP_ALLREDUCE, XPU_REC_NOT_TIMED));
  EXPECT_TRUE(IsProgressRecord(XPU_OP_STEP, XPU_REC_HOST));
  EXPECT_TRUE(IsProgressRecord(XPU_OP_PY_DATALOADER, XPU_REC_HOST));
  EXPECT_FALSE(IsProgressRecord(XPU_OP_PY_GC, XPU_REC_HOST));
  EXPECT_FALSE(IsProgressRecord(XPU_OP_PY_CALLSITE, XPU_REC_HOST));
  EXPECT_FALSE(IsProgressRecord(XPU_OP_KERNEL, XPU_REC_INCOMPLETE));
  EXPECT_FALSE(IsProgressRecord(XPU_OP_PY_CHECKPOINT, XPU_REC_HOST | XPU_REC_BEGIN));
  EXPECT_TRUE(IsProgressRecord(XPU_OP_PY_CHECKPOINT, XPU_REC_HOST | XPU_REC_END));
}

TEST_F(ProgressWatchTest, FloorForShortStepsAndNothingBeforeTheFirstProgress) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  // Registered, no progress yet (start-up): never judged.
  now_ += 100 * kS;
  EXPECT_FALSE(w.Check(job_, now_).has_value());
  now_ += 3 * kS;
  Steps(p, 50 * kMs, 40, now_);  // sets last_progress_rx_ns = now_
  EXPECT_FALSE(w.Check(job_, now_ + 5 * kS).has_value());
  std::optional<ProgressStall> s = w.Check(job_, now_ + 7 * kS);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->threshold_ns, 6 * kS);  // 4 x 50 ms is below the floor
  EXPECT_EQ(s->ranks, std::vector<int32_t>({0}));
  EXPECT_EQ(s->since_ns, now_);
  EXPECT_EQ(s->period_source, "step markers");
  EXPECT_NE(s->trigger.find("made no progress for 7.00 s"), std::string::npos) << s->trigger;
}

TEST_F(ProgressWatchTest, TheEnginesOwnTickIsNoSilenceOfTheJob) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  Steps(p, 50 * kMs, 40, now_);  // last progress at now_
  // The window tick held the job from now_ + 1 s to now_ + 3 s and from
  // now_ + 4 s to now_ + 6 s (it let go while its detectors ran): no record
  // could be applied meanwhile, so those 4 s are no silence of the job.
  job_.set_tick_held({JobState::TickHold{now_ + 1 * kS, now_ + 3 * kS},
                      JobState::TickHold{now_ + 4 * kS, now_ + 6 * kS}});
  EXPECT_EQ(job_.TickHeldWithin(now_ + 2 * kS, now_ + 5 * kS), 2 * kS);
  EXPECT_FALSE(w.Check(job_, now_ + 9 * kS).has_value());  // 5 s silent
  std::optional<ProgressStall> s = w.Check(job_, now_ + 11 * kS);
  ASSERT_TRUE(s.has_value());  // 7 s silent besides the tick
  EXPECT_EQ(s->ranks, std::vector<int32_t>({0}));
  EXPECT_EQ(s->since_ns, now_);
}

TEST_F(ProgressWatchTest, AnIngestBacklogIsNoSilenceUntilTheStreamEnds) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  auto open = std::make_shared<std::atomic<bool>>(true);
  p.stream_open = open;
  // Its daemon sent it every second, with its steps.
  for (int i = 0; i < 8; ++i) {
    now_ += kS;
    p.NoteBatch(now_);
  }
  Steps(p, 50 * kMs, 40, now_);  // last progress and last batch at now_
  EXPECT_EQ(p.SeenUntilNs(now_ + 30 * kS), now_ + 2 * kS);  // 2 x the 1 s gap
  // 30 s without a batch from a stream that is still open: the engine is
  // behind on it (the batches wait unread), the rank is not silent.
  EXPECT_FALSE(w.Check(job_, now_ + 30 * kS).has_value());
  // A batch naming it, with no progress: silent as far as that batch.
  p.NoteBatch(now_ + 30 * kS);
  std::optional<ProgressStall> s = w.Check(job_, now_ + 30 * kS);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ranks, std::vector<int32_t>({0}));
  EXPECT_EQ(s->since_ns, now_);
  // The daemon is gone: all the time since counts.
  Steps(p, 50 * kMs, 40, now_ + 31 * kS);
  const uint64_t progress = now_;
  p.NoteBatch(progress);
  EXPECT_FALSE(w.Check(job_, progress + 20 * kS).has_value());
  open->store(false);
  EXPECT_EQ(p.SeenUntilNs(progress + 20 * kS), progress + 20 * kS);
  EXPECT_TRUE(w.Check(job_, progress + 20 * kS).has_value());
}

TEST_F(ProgressWatchTest, ShortTicksOfSmallJobsHideNoStall) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  Steps(p, 50 * kMs, 40, now_);
  // A tick every second that holds the job for 2 ms: a stopped rank is
  // still suspected after the 6 s floor (and not much later).
  job_.set_tick_held({JobState::TickHold{now_ + 6 * kS, now_ + 6 * kS + 2 * kMs}});
  ASSERT_TRUE(w.Check(job_, now_ + 6 * kS + 100 * kMs).has_value());
}

TEST_F(ProgressWatchTest, LongStepsRaiseTheThreshold) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  Steps(p, 5 * kS, 6, now_);
  std::string source;
  EXPECT_EQ(ProgressWatch::StepPeriodNs(p, &source), 5 * kS);
  EXPECT_EQ(source, "step markers");
  EXPECT_FALSE(w.Check(job_, now_ + 15 * kS).has_value());
  std::optional<ProgressStall> s = w.Check(job_, now_ + 21 * kS);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->threshold_ns, 20 * kS);
  EXPECT_EQ(w.ThresholdNs("j"), 20 * kS);
}

TEST_F(ProgressWatchTest, StallsAreNoSamplesOfTheJobsPace) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  uint64_t t = now_;
  auto progress = [&](uint64_t gap) {
    t += gap;
    p.last_progress_rx_ns = t;
    return w.Check(job_, t);
  };
  for (int i = 0; i < 5; ++i) progress(2 * kS);
  // Two stalls (a stopped rank, then a debugger attached), each seen and
  // marked by the monitor while it lasts.
  for (uint64_t stall : {30 * kS, 20 * kS}) {
    ASSERT_TRUE(w.Check(job_, t + stall - kS).has_value());
    w.MarkStalled("j");
    progress(stall);
  }
  for (int i = 0; i < 3; ++i) progress(2 * kS);
  // The pace is still 2 s a step: the floor (6 s) rules, not 4 x 20 s.
  EXPECT_EQ(w.ThresholdNs("j"), 8 * kS);
  EXPECT_TRUE(w.Check(job_, t + 9 * kS).has_value());
}

TEST_F(ProgressWatchTest, TeardownGetsAGraceAndAFinishedJobNothing) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& a = Proc(0);
  ProcessState& b = Proc(1);
  a.last_progress_rx_ns = b.last_progress_rx_ns = now_;
  a.liveness = Liveness::kExited;
  // One rank exited normally; the other winds down.
  EXPECT_FALSE(w.Check(job_, now_ + 20 * kS).has_value());
  EXPECT_TRUE(w.Check(job_, now_ + 40 * kS).has_value());
  b.liveness = Liveness::kExited;
  EXPECT_FALSE(w.Check(job_, now_ + 400 * kS).has_value());
}

TEST_F(ProgressWatchTest, OffWithAZeroFloor) {
  ProgressWatchOptions o;
  o.floor_ns = 0;
  ProgressWatch w(o);
  Proc(0).last_progress_rx_ns = now_;
  EXPECT_FALSE(w.Check(job_, now_ + 1000 * kS).has_value());
}


// The pace is the job's own (consecutive progress records, host clock);
// how often its batches reach the engine is added on top, not multiplied:
// 50 ms steps whose records arrive in batches every 3 s are suspected after
// max(6 s, 4 x 50 ms) + 3 s, not after 4 x 3 s.
TEST_F(ProgressWatchTest, ArrivalCadenceIsAddedNotMultiplied) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  uint64_t host = now_;
  for (int i = 0; i < 8; ++i) {
    host += 3 * kS;
    now_ += 3 * kS;
    Steps(p, 50 * kMs, 60, host);  // 3 s of 50 ms steps per batch
    EXPECT_FALSE(w.Check(job_, now_).has_value());
  }
  EXPECT_EQ(w.ThresholdNs("j"), 9 * kS);
  EXPECT_FALSE(w.Check(job_, now_ + 8 * kS).has_value());
  std::optional<ProgressStall> s = w.Check(job_, now_ + 10 * kS);
  ASSERT_TRUE(s.has_value());
  EXPECT_NE(s->trigger.find("+ 3.00 s between its progress's arrivals"), std::string::npos)
      << s->trigger;
}

// A job whose steps hold a 20 s quiet phase on its own clock (an
// evaluation with no GPU op): judged against it.
TEST_F(ProgressWatchTest, QuietPhasesOnTheJobsClockRaiseTheThreshold) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  uint64_t host = now_;
  for (int i = 0; i < 6; ++i) {
    host += 20 * kS;
    now_ += 20 * kS;
    Steps(p, 10 * kMs, 2, host);  // two markers after a 20 s silence
    w.Check(job_, now_);
  }
  EXPECT_GE(w.ThresholdNs("j"), 80 * kS);
}

// A one-GPU job's start-up (imports, communicator set-up, compilation):
// progress records 5 s apart, arriving 5 s apart; then 50 ms steps whose
// batches arrive every second, and a stall soon after. The start-up is not
// its pace: threshold max(floor 6 s, 4 x 50 ms) + 1 s, not 4 x 5 s + 5 s.
TEST_F(ProgressWatchTest, StartUpBeforeTheFirstStepIsNoSampleOfThePace) {
  ProgressWatch w(ProgressWatchOptions{});
  ProcessState& p = Proc(0);
  SignatureInfo sync;
  sync.abi.commit = 1;
  sync.abi.kind = XPU_OP_SYNC_STREAM;
  sync.name = "cudaStreamSynchronize";
  p.sigs.Define(2, sync);
  uint64_t host = now_;
  for (int i = 0; i < 6; ++i) {
    host += 5 * kS;
    now_ += 5 * kS;
    xpu_record_v1 r{};
    r.sig_id = 2;
    r.flags = XPU_REC_HOST;
    r.start_ns = host;
    job_.ApplyRecords(p, &r, 1, now_);
    EXPECT_FALSE(w.Check(job_, now_).has_value());
  }
  for (int i = 0; i < 4; ++i) {
    host += kS;
    now_ += kS;
    Steps(p, 50 * kMs, 20, host);
    EXPECT_FALSE(w.Check(job_, now_).has_value());
  }
  EXPECT_EQ(w.ThresholdNs("j"), 7 * kS);
  EXPECT_FALSE(w.Check(job_, now_ + 6 * kS).has_value());
  EXPECT_TRUE(w.Check(job_, now_ + 7500 * kMs).has_value());
}

}  // namespace
}  // namespace xpu::engine::hang
