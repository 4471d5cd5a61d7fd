// The profiling window (cupti_window.h) against the GPU-less runtime's
// libcupti (tests/fake_runtime/fake_cupti.cc): the control-block protocol,
// kernel records in the ring on the host clock, the skip when another CUPTI
// client holds CUPTI, the record cap, and CUPTI being released afterwards.
// The declared CUPTI ABI is checked against the real headers when present.
#include "hook/tracing/cupti_window.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hook/core_api.h"
#include "hook/ring/ring_reader_for_test.h"
#include "xpu_fake.h"

#if __has_include(<cupti_activity.h>)
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cstddef>
// The hook declares CUPTI itself (cupti_abi.h); these are the values and
// offsets of the CUDA 13 headers.
static_assert(xpu::hook::cupti::kErrorMultipleSubscribersNotSupported ==
              CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
static_assert(xpu::hook::cupti::kErrorMaxLimitReached == CUPTI_ERROR_MAX_LIMIT_REACHED);
static_assert(xpu::hook::cupti::kErrorNotInitialized == CUPTI_ERROR_NOT_INITIALIZED);
static_assert(xpu::hook::cupti::kActivityKindConcurrentKernel ==
              CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
static_assert(xpu::hook::cupti::kActivityKindKernel == CUPTI_ACTIVITY_KIND_KERNEL);
static_assert(xpu::hook::cupti::kActivityFlagFlushForced == CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
static_assert(xpu::hook::cupti::kCbDomainRuntimeApi == CUPTI_CB_DOMAIN_RUNTIME_API);
static_assert(xpu::hook::cupti::kApiExit == CUPTI_API_EXIT);
static_assert(offsetof(CUpti_CallbackData, callbackSite) ==
              xpu::hook::cupti::kCallbackDataSiteOffset);
static_assert(offsetof(CUpti_ActivityKernel10, kind) == xpu::hook::cupti::kKernelKindOffset);
static_assert(offsetof(CUpti_ActivityKernel10, start) == xpu::hook::cupti::kKernelStartOffset);
static_assert(offsetof(CUpti_ActivityKernel10, end) == xpu::hook::cupti::kKernelEndOffset);
static_assert(offsetof(CUpti_ActivityKernel10, deviceId) ==
              xpu::hook::cupti::kKernelDeviceIdOffset);
static_assert(offsetof(CUpti_ActivityKernel10, streamId) ==
              xpu::hook::cupti::kKernelStreamIdOffset);
static_assert(offsetof(CUpti_ActivityKernel10, correlationId) ==
              xpu::hook::cupti::kKernelCorrelationIdOffset);
static_assert(offsetof(CUpti_ActivityKernel10, name) == xpu::hook::cupti::kKernelNameOffset);
static_assert(alignof(CUpti_ActivityKernel10) == xpu::hook::cupti::kActivityRecordAlignment);
// The same prefix in the oldest struct version still in the header.
static_assert(offsetof(CUpti_ActivityKernel4, start) == xpu::hook::cupti::kKernelStartOffset);
static_assert(offsetof(CUpti_ActivityKernel4, streamId) == xpu::hook::cupti::kKernelStreamIdOffset);
static_assert(offsetof(CUpti_ActivityKernel4, correlationId) ==
              xpu::hook::cupti::kKernelCorrelationIdOffset);
static_assert(offsetof(CUpti_ActivityKernel4, name) == xpu::hook::cupti::kKernelNameOffset);
#endif

namespace xpu::hook {
namespace {

// Loads the fake libcupti if the window has not yet (the same file, hence
// the same instance the window will use).
uint64_t FakeCounter(const char* key) {
  void* h = dlopen(XPU_FAKE_LIB_DIR "/libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return ~0ull;
  using Fn = unsigned long long (*)(const char*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "xpu_fake_cupti_counter"));
  uint64_t v = fn != nullptr ? fn(key) : ~0ull;
  dlclose(h);
  return v;
}

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

class CuptiWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("XPU_FAKE_CUPTI_OTHER_CLIENT");
    unsetenv("XPU_FAKE_CUPTI_FINALIZE_FAILS");
    layout_ = ComputeLayout(4096, 256, 1 << 16);
    mem_.reset(static_cast<uint8_t*>(calloc(1, layout_.file_size)));
    RingIdentity id;
    id.pid = 1;
    ring_.Adopt(mem_.get(), layout_, id);
    sigs_.Init(&ring_);
    ctl_ = reinterpret_cast<xpu_ring_profile_ctl_v1*>(mem_.get() + XPU_RING_PROFILE_OFFSET);
    options_.cupti_path = XPU_FAKE_LIB_DIR;
    options_.poll_ns = 0;
    options_.detach_wait_ns = 300ull * 1000000;
    options_.buffer_bytes = 64 * 1024;
    options_.max_buffers = 4;
  }

  void Init() { window_.Init(ctl_, &ring_, &sigs_, options_); }

  // The daemon's side of ring.h: fields, then req_id with a release store.
  void Request(uint32_t id, uint32_t duration_ms, uint32_t max_records = 0) {
    ctl_->req_duration_ms = duration_ms;
    ctl_->req_max_records = max_records;
    __atomic_store_n(&ctl_->req_id, id, __ATOMIC_RELEASE);
  }
  uint32_t AckId() const {
    return static_cast<uint32_t>(__atomic_load_n(&ctl_->ack, __ATOMIC_ACQUIRE) >> 32);
  }
  uint32_t Status() const {
    return static_cast<uint32_t>(__atomic_load_n(&ctl_->ack, __ATOMIC_ACQUIRE) & 0xffffffffu);
  }

  // Plays the completion thread until the request has a final status.
  // `during` runs on every tick (the application's work).
  template <typename Fn>
  void TickUntilFinal(uint32_t id, Fn during, int max_ms = 10000) {
    for (int waited = 0; waited < max_ms; waited += 5) {
      window_.Tick(NowNs(), nullptr);
      if (AckId() == id && Status() >= XPU_PROFILE_DONE) return;
      during();
      SleepMs(5);
    }
    FAIL() << "no final status for request " << id << " (status " << Status() << ")";
  }

  std::vector<xpu_record_v1> WindowRecords() {
    std::vector<xpu_record_v1> out;
    testing::TestRingReader reader(ring_.header(), ring_.slots());
    xpu_record_v1 r;
    while (reader.Next(&r) == testing::TestRingReader::Result::kRecord) {
      if (r.flags & XPU_REC_PROFILE_WINDOW) out.push_back(r);
    }
    return out;
  }

  std::string SigName(uint32_t id) const {
    const xpu_signature_v1& s = ring_.signatures()[id];
    return std::string(s.name, strnlen(s.name, XPU_SIG_NAME_INLINE));
  }

  static void LaunchFakeKernels(cudaStream_t stream, int n, uint64_t ns) {
    for (int i = 0; i < n; ++i) {
      void* args[] = {&ns};
      ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                                 args, 0, stream),
                cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }

  RingLayout layout_;
  struct Free {
    void operator()(uint8_t* p) const { free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem_;
  RingWriter ring_;
  SignatureTable sigs_;
  xpu_ring_profile_ctl_v1* ctl_ = nullptr;
  CuptiWindowOptions options_;
  CuptiWindow window_;
};

TEST_F(CuptiWindowTest, PublishesMagicAndRejectsBadRequests) {
  Init();
  EXPECT_EQ(ctl_->hook_magic, XPU_RING_PROFILE_MAGIC);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(ctl_->ack, 0u) << "no request, no answer";
  Request(1, 0);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(AckId(), 1u);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_REJECTED));
  Request(2, XPU_PROFILE_MAX_DURATION_MS + 1);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(AckId(), 2u);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_REJECTED));
  // The same id again is not a new request.
  ctl_->ack = 0;
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(ctl_->ack, 0u);
}

TEST_F(CuptiWindowTest, DisabledByEnvironment) {
  options_.enabled = false;
  Init();
  Request(7, 100);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_SKIPPED_UNAVAILABLE));
  EXPECT_EQ(ctl_->detail, kDetailDisabled);
}

// The whole window: kernels become records on the host clock, then CUPTI is
// finalized from the exit of the next runtime API call.
TEST_F(CuptiWindowTest, WindowRecordsKernelsAndReleasesCupti) {
  Init();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Request(1, 200);
  window_.Tick(NowNs(), nullptr);
  ASSERT_EQ(AckId(), 1u);
  ASSERT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED)) << "detail " << ctl_->detail;
  const uint64_t finalized_before = FakeCounter("finalize_calls");
  EXPECT_EQ(window_.library(), XPU_FAKE_LIB_DIR "/libcupti.so.13");
  const uint64_t start = ctl_->window_start_ns;
  EXPECT_GT(start, 0u);
  EXPECT_EQ(FakeCounter("kernel_kind_enabled"), 1u);
  LaunchFakeKernels(stream, 12, 200000);  // 12 x 200 us
  int device = 0;
  TickUntilFinal(1, [&] { cudaGetDevice(&device); });  // API exits while detaching
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_DONE));
  EXPECT_EQ(ctl_->records, 12u);
  EXPECT_EQ(ctl_->dropped, 0u);
  EXPECT_EQ(ctl_->flags, uint32_t{XPU_PROFILE_FINALIZED | XPU_PROFILE_FINALIZE_CALLBACK});
  EXPECT_EQ(ctl_->windows_total, 1u);
  const uint64_t end = ctl_->window_end_ns;
  EXPECT_GE(end, start);

  std::vector<xpu_record_v1> recs = WindowRecords();
  ASSERT_EQ(recs.size(), 12u);
  uint64_t prev_end = 0;
  for (const xpu_record_v1& r : recs) {
    EXPECT_EQ(r.flags & (XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW),
              XPU_REC_TIMED | XPU_REC_PROFILE_WINDOW);
    EXPECT_EQ(SigName(r.sig_id), "xpu_fake_kernel");
    EXPECT_EQ(ring_.signatures()[r.sig_id].kind, XPU_OP_KERNEL);
    // The fake CUPTI clock is CLOCK_MONOTONIC: these are host (realtime)
    // times only if the window converted them.
    EXPECT_GE(r.start_ns + 2000000, start) << "kernel before the window";
    EXPECT_LE(r.start_ns, end);
    EXPECT_GE(r.duration, 190000u);
    EXPECT_LE(r.duration, 50000000u);
    EXPECT_GE(r.start_ns + 1000, prev_end) << "one stream runs its kernels in order";
    prev_end = r.start_ns + r.duration;
    EXPECT_GT(r.seq, 0u) << "correlation id";
  }
  // CUPTI released: no kind enabled, no subscriber, finalized once more.
  EXPECT_EQ(FakeCounter("finalize_calls"), finalized_before + 1);
  EXPECT_EQ(FakeCounter("kernel_kind_enabled"), 0u);
  EXPECT_EQ(FakeCounter("subscribed"), 0u);
  EXPECT_EQ(FakeCounter("runtime_callbacks"), 0u);
  // Kernels after the window are not seen.
  const uint64_t emitted = FakeCounter("records_emitted");
  LaunchFakeKernels(stream, 3, 1000);
  EXPECT_EQ(FakeCounter("records_emitted"), emitted);
  EXPECT_TRUE(window_.idle());
  cudaStreamDestroy(stream);
}

// A process that makes no runtime call after the window: CUPTI is finalized
// from the completion thread once the wait is over.
TEST_F(CuptiWindowTest, FinalizesFromItsOwnThreadWhenTheProcessIsIdle) {
  Init();
  const uint64_t in_callback = FakeCounter("finalize_in_callback");
  Request(3, 50);
  window_.Tick(NowNs(), nullptr);
  ASSERT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED));
  TickUntilFinal(3, [] {});
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_DONE));
  EXPECT_EQ(ctl_->flags, uint32_t{XPU_PROFILE_FINALIZED});
  EXPECT_EQ(FakeCounter("finalize_in_callback"), in_callback);
  EXPECT_EQ(FakeCounter("subscribed"), 0u);
}

// Another CUPTI client (torch.profiler/Kineto, Nsight) holds the subscriber
// slot: the window is skipped and CUPTI is not touched beyond the attempt.
TEST_F(CuptiWindowTest, SkipsWhenAnotherClientHoldsCupti) {
  Init();
  setenv("XPU_FAKE_CUPTI_OTHER_CLIENT", "1", 1);
  const uint64_t finalized = FakeCounter("finalize_calls");
  const uint64_t enables = FakeCounter("enable_calls");
  Request(4, 100);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(AckId(), 4u);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_SKIPPED_OTHER_CLIENT));
  EXPECT_EQ(ctl_->detail, cupti::kErrorMultipleSubscribersNotSupported);
  EXPECT_EQ(FakeCounter("finalize_calls"), finalized)
      << "someone else's CUPTI must not be finalized";
  EXPECT_EQ(FakeCounter("enable_calls"), enables);
  EXPECT_TRUE(window_.idle());
  unsetenv("XPU_FAKE_CUPTI_OTHER_CLIENT");
  // The next request, with CUPTI free again, runs.
  Request(5, 50);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED));
  TickUntilFinal(5, [] {});
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_DONE));
}

// CUPTI that cannot detach: the window still ends, leaves no subscriber or
// callback behind, says CUPTI was not finalized, and the next window runs.
TEST_F(CuptiWindowTest, FinalizeRefusedStillLeavesNothingBehind) {
  Init();
  setenv("XPU_FAKE_CUPTI_FINALIZE_FAILS", "1", 1);
  Request(8, 50);
  window_.Tick(NowNs(), nullptr);
  ASSERT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED));
  int device = 0;
  TickUntilFinal(8, [&] { cudaGetDevice(&device); });
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_DONE));
  EXPECT_FALSE(ctl_->flags & XPU_PROFILE_FINALIZED);
  EXPECT_EQ(FakeCounter("subscribed"), 0u);
  EXPECT_EQ(FakeCounter("runtime_callbacks"), 0u);
  EXPECT_EQ(FakeCounter("kernel_kind_enabled"), 0u);
  unsetenv("XPU_FAKE_CUPTI_FINALIZE_FAILS");
  Request(9, 50);
  window_.Tick(NowNs(), nullptr);
  EXPECT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED)) << "detail " << ctl_->detail;
  TickUntilFinal(9, [&] { cudaGetDevice(&device); });
  EXPECT_TRUE(ctl_->flags & XPU_PROFILE_FINALIZED);
}

// The record cap: what is over it is dropped, counted and flagged.
TEST_F(CuptiWindowTest, CapsRecordsPerWindow) {
  Init();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Request(6, 100, /*max_records=*/3);
  window_.Tick(NowNs(), nullptr);
  ASSERT_EQ(Status(), static_cast<uint32_t>(XPU_PROFILE_STARTED));
  LaunchFakeKernels(stream, 10, 1000);
  TickUntilFinal(6, [] {});
  EXPECT_EQ(ctl_->records, 3u);
  EXPECT_EQ(ctl_->dropped, 7u);
  EXPECT_TRUE(ctl_->flags & XPU_PROFILE_TRUNCATED);
  EXPECT_EQ(WindowRecords().size(), 3u);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace xpu::hook
