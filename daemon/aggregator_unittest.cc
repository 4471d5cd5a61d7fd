#include "daemon/aggregator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "xpu/formulas.h"

namespace xpu::daemon {
namespace {

constexpr uint64_t kSec = 1000000000ull;

xpu_record_v1 Rec(uint32_t sig, uint64_t start, uint32_t dur, uint16_t flags, int32_t lat = 0) {
  xpu_record_v1 r{};
  r.sig_id = sig;
  r.start_ns = start;
  r.duration = dur;
  r.flags = flags;
  r.issue_latency_ns = lat;
  return r;
}

TEST(AggregatorTest, StatsMatchABruteForceReference) {
  xpu_signature_v1 gemm{};
  gemm.kind = XPU_OP_GEMM;
  gemm.m = 64;
  gemm.n = 32;
  gemm.k = 16;
  gemm.batch = 3;
  xpu_signature_v1 ar{};
  ar.kind = XPU_OP_ALLGATHER;
  ar.dtype = XPU_DT_BF16;
  ar.count = 1000;
  ar.comm_nranks = 8;
  Aggregator agg(5 * kSec);
  std::mt19937 rng(3);
  // Reference sums for window [100 s, 105 s) of sig 1 and 2.
  uint64_t count[3] = {}, total[3] = {}, tcount[3] = {}, ttotal[3] = {},
           tmin[3] = {~0ull, ~0ull, ~0ull}, tmax[3] = {};
  double sumsq[3] = {};
  uint64_t lat_n[3] = {};
  int64_t lat_sum[3] = {};
  for (int i = 0; i < 1000; ++i) {
    const uint32_t sig = 1 + i % 2;
    const uint64_t start = 100 * kSec + (rng() % (5 * kSec));
    uint16_t flags = (rng() % 3 == 0) ? XPU_REC_NOT_TIMED : XPU_REC_TIMED;
    const bool us = rng() % 5 == 0;
    if (us) flags |= XPU_REC_DUR_US;
    const bool lat = rng() % 2 == 0;
    const int32_t lat_v = static_cast<int32_t>(rng() % 20000) - 5000;
    if (lat) flags |= XPU_REC_ISSUE_LAT_VALID;
    const uint32_t dur = 1 + rng() % 100000;
    agg.Add(Rec(sig, start, dur, flags, lat_v), sig == 1 ? &gemm : &ar);
    const uint64_t ns = us ? uint64_t{dur} * 1000 : dur;
    ++count[sig];
    total[sig] += ns;
    if (flags & XPU_REC_TIMED) {
      ++tcount[sig];
      ttotal[sig] += ns;
      tmin[sig] = std::min(tmin[sig], ns);
      tmax[sig] = std::max(tmax[sig], ns);
      sumsq[sig] += double(ns) * double(ns);
    }
    if (lat) {
      ++lat_n[sig];
      lat_sum[sig] += lat_v;
    }
  }
  std::vector<xpu::v1::WindowSummary> out;
  agg.TakeCompleted(false, &out);
  EXPECT_TRUE(out.empty());  // newest record is inside the window: still open
  agg.TakeCompleted(true, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].window_start_ns(), 100 * kSec);
  EXPECT_EQ(out[0].window_end_ns(), 105 * kSec);
  ASSERT_EQ(out[0].stats_size(), 2);
  for (const auto& s : out[0].stats()) {
    const uint32_t i = s.sig_id();
    EXPECT_EQ(s.count(), count[i]);
    EXPECT_EQ(s.total_ns(), total[i]);
    EXPECT_EQ(s.timed_count(), tcount[i]);
    EXPECT_EQ(s.timed_total_ns(), ttotal[i]);
    EXPECT_EQ(s.timed_min_ns(), tmin[i]);
    EXPECT_EQ(s.timed_max_ns(), tmax[i]);
    EXPECT_NEAR(s.timed_sumsq_ns2(), sumsq[i], sumsq[i] * 1e-12);
    EXPECT_EQ(s.issue_latency_count(), lat_n[i]);
    EXPECT_EQ(s.issue_latency_sum_ns(), lat_sum[i]);
  }
  // FLOPs and bytes: per timed occurrence, from formulas.h.
  EXPECT_DOUBLE_EQ(out[0].stats(0).flops(), tcount[1] * 2.0 * 64 * 32 * 16 * 3);
  EXPECT_DOUBLE_EQ(out[0].stats(0).bytes(), 0.0);
  EXPECT_DOUBLE_EQ(out[0].stats(1).bytes(), tcount[2] * 1000.0 * 8 * 2);
  EXPECT_DOUBLE_EQ(out[0].stats(1).flops(), 0.0);
}

TEST(AggregatorTest, WindowsCloseAfterOneWindowOfSlack) {
  Aggregator agg(5 * kSec);
  agg.Add(Rec(1, 10 * kSec, 1, XPU_REC_TIMED), nullptr);
  agg.Add(Rec(1, 16 * kSec, 1, XPU_REC_TIMED), nullptr);
  std::vector<xpu::v1::WindowSummary> out;
  agg.TakeCompleted(false, &out);
  EXPECT_TRUE(out.empty());  // [10,15) stays open for late records until 20 s
  agg.Add(Rec(1, 12 * kSec, 7, XPU_REC_TIMED), nullptr);  // late record
  agg.Add(Rec(1, 20 * kSec, 1, XPU_REC_TIMED), nullptr);
  agg.TakeCompleted(false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].window_start_ns(), 10 * kSec);
  EXPECT_EQ(out[0].stats(0).count(), 2u);
  EXPECT_EQ(out[0].stats(0).timed_max_ns(), 7u);
  EXPECT_EQ(agg.open_windows(), 2u);
}

TEST(AggregatorTest, HostileTimestampsKeepOpenWindowsBounded) {
  Aggregator agg(kSec);
  std::mt19937_64 rng(9);
  std::vector<xpu::v1::WindowSummary> out;
  for (int i = 0; i < 1000; ++i) {
    agg.Add(Rec(1, rng(), 1, 0), nullptr);
    agg.TakeCompleted(false, &out);
    EXPECT_LE(agg.open_windows(), Aggregator::kMaxOpenWindows);
  }
  agg.TakeCompleted(true, &out);
  uint64_t total = 0;
  for (const auto& w : out)
    for (const auto& s : w.stats()) total += s.count();
  EXPECT_EQ(total, 1000u);
  EXPECT_EQ(agg.open_windows(), 0u);
}

}  // namespace
}  // namespace xpu::daemon

namespace xpu::daemon {
namespace {

TEST(AggregatorTest, PluginRecordsAddTimingNotOccurrences) {
  Aggregator agg(1000000000ull);
  xpu_signature_v1 sig{};
  sig.kind = XPU_OP_ALLREDUCE;
  sig.dtype = XPU_DT_F32;
  sig.count = 1024;
  sig.comm_nranks = 4;
  xpu_record_v1 occurrence{};
  occurrence.sig_id = 3;
  occurrence.start_ns = 5000000000ull;
  occurrence.duration = 900;
  occurrence.seq = 7;
  occurrence.flags = XPU_REC_NOT_TIMED;
  xpu_record_v1 timing = occurrence;
  timing.start_ns += 100;
  timing.duration = 400;
  timing.flags = XPU_REC_PLUGIN | XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID;
  agg.Add(occurrence, &sig);
  agg.Add(timing, &sig);
  std::vector<xpu::v1::WindowSummary> windows;
  agg.TakeCompleted(/*force=*/true, &windows);
  ASSERT_EQ(windows.size(), 1u);
  ASSERT_EQ(windows[0].stats_size(), 1);
  const auto& st = windows[0].stats(0);
  EXPECT_EQ(st.count(), 1u);
  EXPECT_EQ(st.total_ns(), 900u);
  EXPECT_EQ(st.timed_count(), 1u);
  EXPECT_EQ(st.timed_total_ns(), 400u);
  EXPECT_DOUBLE_EQ(st.bytes(), 4096.0);
}

}  // namespace
}  // namespace xpu::daemon
