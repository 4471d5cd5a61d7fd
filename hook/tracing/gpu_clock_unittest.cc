// hook/tracing/gpu_clock_unittest.cc — GPU-to-host mapping math with injected
// elapsed times (fake CUDA events on a fake GPU clock). Thread-safety:
// single-threaded.
#include "hook/tracing/gpu_clock.h"

#include <unistd.h>

#include "gtest/gtest.h"
#include "hook/core_api.h"
#include "hook/tracing/fake_cuda_for_test.h"

namespace xpu::hook {
namespace {

using namespace xpu::hook::testing;  // NOLINT

TEST(ClockMathTest, OffsetByMs) {
  EXPECT_EQ(OffsetByMs(1000000000, 0.0), 1000000000u);
  EXPECT_EQ(OffsetByMs(1000000000, 1.5), 1001500000u);
  EXPECT_EQ(OffsetByMs(1000000000, -0.25), 999750000u);
  EXPECT_EQ(OffsetByMs(1000000000, 0.0000004), 1000000000u);  // rounds to nearest ns
  EXPECT_EQ(OffsetByMs(1000000000, 0.0000006), 1000000001u);
  EXPECT_EQ(OffsetByMs(100, -1.0), 0u);  // clamps, never wraps
  EXPECT_EQ(MidpointNs(10, 20), 15u);
  EXPECT_EQ(MidpointNs(UINT64_MAX - 2, UINT64_MAX), UINT64_MAX - 1);  // no overflow
}

TEST(ClockMathTest, NowNsIsRealtime) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ref = uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
  uint64_t now = NowNs();
  EXPECT_GE(now, ref);
  EXPECT_LT(now - ref, 10ull * 1000000000ull);
}

class GpuClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InstallFakeCuda(&api_);
    clock_.Init(&api_, 5000000000ull);
    g_gpu_ms = 0;
  }
  cudaEvent_t Recorded(double at_ms) {
    cudaEvent_t e;
    FakeEventCreate(&e, cudaEventDefault);
    g_gpu_ms = at_ms;
    FakeEventRecord(e, nullptr);
    return e;
  }
  CudaApi api_;
  GpuClock clock_;
};

TEST_F(GpuClockTest, MapsWithInjectedReference) {
  cudaEvent_t ref = Recorded(100.0);
  clock_.SetReferenceForTest(0, ref, 5000000000000ull);
  uint64_t host = 0;
  cudaEvent_t ev = Recorded(102.5);  // 2.5 ms after the reference
  ASSERT_TRUE(clock_.MapGpuToHost(0, clock_.Generation(0), ev, &host));
  EXPECT_EQ(host, 5000000000000ull + 2500000ull);
  cudaEvent_t before = Recorded(99.0);  // before the reference: negative elapsed
  ASSERT_TRUE(clock_.MapGpuToHost(0, clock_.Generation(0), before, &host));
  EXPECT_EQ(host, 5000000000000ull - 1000000ull);
  EXPECT_FALSE(clock_.MapGpuToHost(1, 1, ev, &host));  // device 1 not calibrated
  cudaEvent_t untimed;
  FakeEventCreate(&untimed, cudaEventDisableTiming);
  FakeEventRecord(untimed, nullptr);
  EXPECT_FALSE(clock_.MapGpuToHost(0, clock_.Generation(0), untimed, &host));
}

TEST_F(GpuClockTest, OpKeepsItsGenerationAcrossOneRecalibration) {
  clock_.SetReferenceForTest(0, Recorded(0.0), 1000000000ull);  // gen 1: gpu 0 ms = host 1 s
  uint32_t gen1 = clock_.Generation(0);
  cudaEvent_t op = Recorded(10.0);
  // Re-calibration with a slightly different offset (host clock slewed 3 us).
  clock_.SetReferenceForTest(0, Recorded(20.0), 1020003000ull);  // gen 2
  uint64_t host = 0;
  ASSERT_TRUE(clock_.MapGpuToHost(0, gen1, op, &host));
  EXPECT_EQ(host, 1010000000ull);  // against gen 1's reference
  ASSERT_TRUE(clock_.MapGpuToHost(0, clock_.Generation(0), op, &host));
  EXPECT_EQ(host, 1010003000ull);                                // a new op would map with gen 2
  clock_.SetReferenceForTest(0, Recorded(30.0), 1030003000ull);  // gen 3: gen 1's slot reused
  ASSERT_TRUE(clock_.MapGpuToHost(0, gen1, op, &host));
  EXPECT_EQ(host, 1010003000ull);  // falls back to the current reference
}

TEST_F(GpuClockTest, CalibrateBracketsHostTime) {
  EXPECT_FALSE(clock_.Calibrated(0));
  uint64_t before = NowNs();
  ASSERT_TRUE(clock_.Calibrate(0));
  uint64_t after = NowNs();
  EXPECT_TRUE(clock_.Calibrated(0));
  EXPECT_EQ(clock_.Generation(0), 1u);
  // An event recorded at the same fake GPU instant maps inside [before, after].
  g_gpu_ms = 0;
  cudaEvent_t ev = Recorded(0.0);
  uint64_t host = 0;
  ASSERT_TRUE(clock_.MapGpuToHost(0, 1, ev, &host));
  EXPECT_GE(host, before);
  EXPECT_LE(host, after);
  // Not due yet: no new generation. Due: a new one.
  clock_.MaybeRecalibrate(after);
  EXPECT_EQ(clock_.Generation(0), 1u);
  clock_.MaybeRecalibrate(after + 6000000000ull);
  EXPECT_EQ(clock_.Generation(0), 2u);
}

TEST(EstimateRateTest, MeasuresDriftOverALongBaselineOnly) {
  // 5 s of host time over 4.9999 s of GPU time: the GPU timer runs 20 ppm slow.
  EXPECT_NEAR(EstimateRate(5000000000ull, 4999.9, 1.0), 1.00002, 1e-9);
  EXPECT_EQ(EstimateRate(100000000ull, 99.0, 1.0), 1.0);             // 0.1 s: too short
  EXPECT_EQ(EstimateRate(5000000000ull, 4000.0, 1.00001), 1.00001);  // 25 %: broken, keep
  EXPECT_EQ(EstimateRate(5000000000ull, 5000.0, 7.0), 1.0);          // a nonsense previous
}

TEST_F(GpuClockTest, RecalibrationMeasuresTheRateAndMapsWithIt) {
  // Fake GPU clock 100 ppm slow against the host: two calibrations about
  // 0.6 s apart give the rate; an event 10 ms after the second reference
  // then maps 10 ms x rate later, not 10 ms.
  g_auto_complete = true;
  g_gpu_ms = 1000.0;
  const uint64_t c1 = NowNs();
  ASSERT_TRUE(clock_.Calibrate(0));
  const uint64_t t0 = NowNs();
  usleep(600 * 1000);
  const uint64_t t1 = NowNs();
  g_gpu_ms = 1000.0 + static_cast<double>(t1 - t0) / 1e6 * (1 - 1e-4);
  ASSERT_TRUE(clock_.Calibrate(0));
  const uint64_t c2 = NowNs();
  // Each reference's host time is somewhere in its calibration's bracket
  // ([c1, t0], [t1, c2]), not at t0 and t1 exactly: the time between them
  // is an error of the measured rate, 10 ms x that / (t1 - t0) in the
  // mapping below (a few ns, unless the test was descheduled there).
  const double slack_ns =
      10e6 * static_cast<double>((t0 - c1) + (c2 - t1)) / static_cast<double>(t1 - t0);
  cudaEvent_t ref2;
  FakeEventCreate(&ref2, cudaEventDefault);
  FakeEventRecord(ref2, nullptr);  // at the second reference's GPU time
  cudaEvent_t ev = Recorded(g_gpu_ms + 10.0);
  uint64_t at_ref = 0, at_ev = 0;
  ASSERT_TRUE(clock_.MapGpuToHost(0, clock_.Generation(0), ref2, &at_ref));
  ASSERT_TRUE(clock_.MapGpuToHost(0, clock_.Generation(0), ev, &at_ev));
  // 10 ms x (1 + 1e-4) = 10.001 ms, within the brackets' few-microsecond noise.
  EXPECT_NEAR(static_cast<double>(at_ev - at_ref), 10.001e6, 200.0 + slack_ns);
  g_auto_complete = false;
}

}  // namespace
}  // namespace xpu::hook
