// The daemon's side of a profiling window (profile_window.h) against a hook
// played from the ABI headers alone (the control block of ring.h): the
// request, the capture, the summary shipped instead of the records, and the
// statuses of windows that do not run.
#include "daemon/profile_window.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/ring/testing/test_ring_writer.h"
#include "daemon/collector.h"

namespace xpu::daemon {
namespace {

using ring::testing::TestRingConfig;
using ring::testing::TestRingWriter;

enum class HookMode { kRunsWindow, kOtherClient, kSilent, kNoWindows };

// Plays the hook's completion thread for one request.
class FakeHook {
 public:
  FakeHook(TestRingWriter* ring, HookMode mode) : ring_(ring), mode_(mode) {
    ctl_ = reinterpret_cast<xpu_ring_profile_ctl_v1*>(ring->base() + XPU_RING_PROFILE_OFFSET);
    if (mode != HookMode::kNoWindows)
      __atomic_store_n(&ctl_->hook_magic, XPU_RING_PROFILE_MAGIC, __ATOMIC_RELEASE);
    gemm_ = ring->AddSignature(XPU_OP_KERNEL, "gemm");
    nccl_ = ring->AddSignature(XPU_OP_KERNEL, "ncclDevKernel_AllReduce");
    fwd_ = ring->AddSignature(XPU_OP_PY_API, "forward");
    coll_ = ring->AddSignature(XPU_OP_ALLREDUCE, "ncclAllReduce");
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeHook() {
    stop_ = true;
    thread_.join();
  }
  uint32_t duration_seen() const { return duration_ms_.load(); }
  uint64_t window_start() const { return start_; }

 private:
  void Ack(uint32_t id, uint32_t status) {
    __atomic_store_n(&ctl_->ack, (uint64_t{id} << 32) | status, __ATOMIC_RELEASE);
  }
  void Run() {
    uint32_t id = 0;
    while (!stop_ && (id = __atomic_load_n(&ctl_->req_id, __ATOMIC_ACQUIRE)) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (stop_ || mode_ == HookMode::kSilent || mode_ == HookMode::kNoWindows) return;
    duration_ms_ = ctl_->req_duration_ms;
    if (mode_ == HookMode::kOtherClient) {
      ctl_->detail = 39;
      Ack(id, XPU_PROFILE_SKIPPED_OTHER_CLIENT);
      return;
    }
    const uint64_t t0 = 1000000000000ull;  // any host time: the summary is relative to the window
    start_ = t0;
    ctl_->window_start_ns = t0;
    Ack(id, XPU_PROFILE_STARTED);
    // The window [t0, t0 + 1 ms): kernels as in the analysis tests, scaled
    // by 1000: gemm [100,300) [500,600) us, allreduce [250,450) us.
    const uint16_t w = XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW;
    ring_->Write(TestRingWriter::MakeRecord(gemm_, t0 + 100000, 200000, w));
    ring_->Write(TestRingWriter::MakeRecord(nccl_, t0 + 250000, 200000, w));
    ring_->Write(TestRingWriter::MakeRecord(gemm_, t0 + 500000, 100000, w));
    // What keeps flowing as usual: a Python event, an interposer record.
    ring_->Write(TestRingWriter::MakeRecord(fwd_, t0, 50000, XPU_REC_HOST));
    ring_->Write(TestRingWriter::MakeRecord(coll_, t0 + 250000, 200000, XPU_REC_NOT_TIMED));
    ctl_->records = 3;
    ctl_->window_end_ns = t0 + 1000000;
    ctl_->flags = XPU_PROFILE_FINALIZED | XPU_PROFILE_FINALIZE_CALLBACK;
    Ack(id, XPU_PROFILE_DONE);
  }

  TestRingWriter* ring_;
  HookMode mode_;
  xpu_ring_profile_ctl_v1* ctl_;
  uint32_t gemm_ = 0, nccl_ = 0, fwd_ = 0, coll_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> duration_ms_{0};
  uint64_t start_ = 0;
  std::thread thread_;
};

class ProfileWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CollectorOptions o;
    o.liveness_interval_ns = ~0ull;
    o.profile.poll_ms = 5;
    o.profile.grace_ms = 500;
    collector_ = std::make_unique<Collector>(o);
    drain_ = std::thread([this] {
      while (!stop_) {
        collector_->DrainOnce(MonotonicNs());
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
  }
  void TearDown() override {
    stop_ = true;
    drain_.join();
  }
  TestRingWriter* AddRing(int rank, const std::string& job = "job-p") {
    TestRingConfig cfg;
    cfg.job = job;
    cfg.rank = rank;
    cfg.pid = 500 + rank;
    rings_.push_back(TestRingWriter::Create(cfg));
    ring::RingReaderOptions ro;
    collector_
        ->AddRing(std::move(ring::RingReader::FromFd(rings_.back()->fd(), ro).value()), PeerInfo{},
                  MonotonicNs())
        .value();
    return rings_.back().get();
  }
  xpu::v1::ProfileReply Profile(uint32_t ms, const std::string& job = "job-p") {
    xpu::v1::Command cmd;
    cmd.set_command_id(9);
    cmd.set_kind("profile");
    cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
    cmd.set_job(job);
    cmd.set_profile_ms(ms);
    xpu::v1::CommandReply reply;
    collector_->HandleCommand(cmd, &reply);
    EXPECT_TRUE(reply.ok()) << reply.error();
    EXPECT_EQ(reply.command_id(), 9u);
    xpu::v1::ProfileReply p;
    EXPECT_TRUE(p.ParseFromString(reply.payload()));
    return p;
  }

  std::unique_ptr<Collector> collector_;
  std::vector<std::unique_ptr<TestRingWriter>> rings_;
  std::atomic<bool> stop_{false};
  std::thread drain_;
};

TEST_F(ProfileWindowTest, ShipsBehaviourPatternsNotRecords) {
  TestRingWriter* ring = AddRing(0);
  FakeHook hook(ring, HookMode::kRunsWindow);
  xpu::v1::ProfileReply reply = Profile(250);
  EXPECT_EQ(hook.duration_seen(), 250u);
  ASSERT_EQ(reply.processes_size(), 1);
  const xpu::v1::ProcessProfile& p = reply.processes(0);
  EXPECT_EQ(p.status(), "done") << p.reason();
  EXPECT_EQ(p.identity().rank(), 0);
  EXPECT_EQ(p.kernel_records(), 3u);
  EXPECT_EQ(p.window_start_ns(), hook.window_start());
  EXPECT_EQ(p.t1_ns() - p.t0_ns(), 1000000u);
  EXPECT_EQ(p.hook_flags(), uint32_t{XPU_PROFILE_FINALIZED | XPU_PROFILE_FINALIZE_CALLBACK});
  // gemm: [100,300) + [500,600) of 1000 us -> 0.3; allreduce minus gemm:
  // [300,450) -> 0.15; forward [0,50) with nothing above it -> 0.05.
  ASSERT_EQ(p.functions_size(), 3);
  EXPECT_EQ(p.functions(0).name(), "gemm");
  EXPECT_EQ(p.functions(0).cls(), 1u);
  EXPECT_DOUBLE_EQ(p.functions(0).beta(), 0.3);
  EXPECT_EQ(p.functions(0).executions(), 2u);
  EXPECT_EQ(p.functions(0).min_exec_ns(), 100000u);
  EXPECT_EQ(p.functions(1).name(), "ncclDevKernel_AllReduce");
  EXPECT_EQ(p.functions(1).cls(), 3u);
  EXPECT_DOUBLE_EQ(p.functions(1).beta(), 0.15);
  EXPECT_EQ(p.functions(2).name(), "forward");
  EXPECT_EQ(p.functions(2).cls(), 4u);
  EXPECT_DOUBLE_EQ(p.functions(2).beta(), 0.05);

  // The raw window records stay on the node: not in the engine batches, not
  // in the history; the other two records flow as always.
  size_t forwarded = 0;
  for (const auto& b : collector_->TakeBatches()) {
    for (const auto& pb : b.processes()) {
      for (size_t i = 0; i + 32 <= pb.records().size(); i += 32) {
        xpu_record_v1 r;
        memcpy(&r, pb.records().data() + i, sizeof(r));
        EXPECT_FALSE(r.flags & XPU_REC_PROFILE_WINDOW);
        ++forwarded;
      }
    }
  }
  EXPECT_EQ(forwarded, 2u);
  xpu::v1::Command hist;
  hist.set_kind("history");
  hist.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  xpu::v1::CommandReply h;
  collector_->HandleCommand(hist, &h);
  ASSERT_EQ(h.processes_size(), 1);
  EXPECT_EQ(h.processes(0).records().size(), 2u * 32);
  EXPECT_EQ(collector_->stats().records_profile_unclaimed, 0u);
}

TEST_F(ProfileWindowTest, OtherCuptiClientIsReportedAsSkipped) {
  TestRingWriter* ring = AddRing(1);
  FakeHook hook(ring, HookMode::kOtherClient);
  xpu::v1::ProfileReply reply = Profile(100);
  ASSERT_EQ(reply.processes_size(), 1);
  EXPECT_EQ(reply.processes(0).status(), "skipped_other_client");
  EXPECT_NE(reply.processes(0).reason().find("another CUPTI client is active"), std::string::npos)
      << reply.processes(0).reason();
  EXPECT_EQ(reply.processes(0).functions_size(), 0);
}

TEST_F(ProfileWindowTest, OlderHookAndSilentHook) {
  FakeHook old(AddRing(2), HookMode::kNoWindows);
  FakeHook silent(AddRing(3), HookMode::kSilent);
  const auto t0 = std::chrono::steady_clock::now();
  xpu::v1::ProfileReply reply = Profile(100);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(reply.processes_size(), 2);
  for (const auto& p : reply.processes()) {
    if (p.identity().rank() == 2) {
      EXPECT_EQ(p.status(), "unsupported");
    } else {
      EXPECT_EQ(p.status(), "timeout");
      EXPECT_NE(p.reason().find("did not answer"), std::string::npos) << p.reason();
    }
  }
  // Window 100 ms + grace 500 ms, not the default minutes.
  EXPECT_LT(s, 5.0);
}

TEST_F(ProfileWindowTest, OnlyTheRequestedJobAndAsyncReply) {
  TestRingWriter* mine = AddRing(0, "job-a");
  AddRing(0, "job-b");
  FakeHook hook(mine, HookMode::kRunsWindow);
  xpu::v1::Command cmd;
  cmd.set_command_id(11);
  cmd.set_kind("profile");
  cmd.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  cmd.set_job("job-a");
  cmd.set_profile_ms(50);
  std::promise<xpu::v1::CommandReply> got;
  ASSERT_TRUE(collector_->HandleCommandAsync(
      cmd, [&](xpu::v1::CommandReply r) { got.set_value(std::move(r)); }));
  xpu::v1::CommandReply r = got.get_future().get();
  xpu::v1::ProfileReply p;
  ASSERT_TRUE(p.ParseFromString(r.payload()));
  ASSERT_EQ(p.processes_size(), 1);
  EXPECT_EQ(p.processes(0).identity().job(), "job-a");
  EXPECT_EQ(p.processes(0).status(), "done");
  // Other commands stay synchronous.
  xpu::v1::Command hist;
  hist.set_kind("history");
  hist.mutable_caller()->set_all_jobs(true);  // root, as the engine says
  EXPECT_FALSE(collector_->HandleCommandAsync(hist, [](xpu::v1::CommandReply) {}));
}

// Window records nobody asked for (a window the daemon gave up on, another
// daemon's request): dropped and counted, never forwarded.
TEST_F(ProfileWindowTest, UnclaimedWindowRecordsAreDroppedAndCounted) {
  TestRingWriter* ring = AddRing(0);
  const uint32_t k = ring->AddSignature(XPU_OP_KERNEL, "k");
  for (int i = 0; i < 5; ++i) {
    ring->Write(
        TestRingWriter::MakeRecord(k, 1000 + i, 10, XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW));
  }
  ring->Write(TestRingWriter::MakeRecord(k, 2000, 10, XPU_REC_TIMED));
  for (int i = 0; i < 200 && collector_->stats().records_read < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(collector_->stats().records_profile_unclaimed, 5u);
  size_t forwarded = 0;
  for (const auto& b : collector_->TakeBatches()) {
    for (const auto& pb : b.processes()) forwarded += pb.records().size() / 32;
  }
  EXPECT_EQ(forwarded, 1u);
}

TEST(ProfileStatusTest, NamesAndReasons) {
  EXPECT_EQ(ProfileStatusName(XPU_PROFILE_DONE), "done");
  EXPECT_EQ(ProfileStatusReason(XPU_PROFILE_DONE, 0), "");
  EXPECT_NE(ProfileStatusReason(XPU_PROFILE_SKIPPED_UNAVAILABLE, -1).find("XPU_CUPTI_PATH"),
            std::string::npos);
  EXPECT_NE(ProfileStatusReason(XPU_PROFILE_FAILED, 17).find("17"), std::string::npos);
}

}  // namespace
}  // namespace xpu::daemon
