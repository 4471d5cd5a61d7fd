#include "engine/detectors/void_baseline.h"

#include <gtest/gtest.h>

namespace xpu::engine {
namespace {

TEST(VoidBaselineTest, ThresholdBaselineAndPreviousRuns) {
  VoidBaseline b;
  // Windows under the threshold build the baseline (2 windows).
  VoidBaseline::Verdict v = b.Judge(0.04, 0.25, 0.05, 2, nullptr);
  EXPECT_FALSE(v.over);
  EXPECT_FALSE(v.have_base);
  v = b.Judge(0.30, 0.25, 0.05, 2, nullptr);  // over: not part of the baseline
  EXPECT_TRUE(v.over);
  b.Judge(0.06, 0.25, 0.05, 2, nullptr);
  v = b.Judge(0.12, 0.25, 0.05, 2, nullptr);
  EXPECT_TRUE(v.have_base);
  EXPECT_DOUBLE_EQ(v.mean_base, 0.05);
  EXPECT_TRUE(v.over);  // 0.12 > 0.05 + 0.05
  EXPECT_FALSE(b.Judge(0.09, 0.25, 0.05, 2, nullptr).over);
  // Previous runs at 2 %: 0.08 is over them by more than 0.05.
  history::HistoryFigure prev{0.02, 3};
  VoidBaseline fresh;
  v = fresh.Judge(0.08, 0.25, 0.05, 2, &prev);
  EXPECT_TRUE(v.over);
  history::HistoryBaseline hb;
  hb.job_name = "gpt";
  hb.gpu_model = "Test GPU";
  EXPECT_EQ(VoidComparisons(v, &prev, &hb), ", 2.0 % in " + hb.Describe(3));
  EXPECT_EQ(VoidComparisons(b.Judge(0.05, 0.25, 0.05, 2, nullptr), nullptr, nullptr),
            ", baseline 5.0 %");
}

}  // namespace
}  // namespace xpu::engine
