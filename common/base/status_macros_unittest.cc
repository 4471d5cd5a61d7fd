// common/base/status_macros_unittest.cc
#include "common/base/status_macros.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace xpu {
namespace {

int g_calls = 0;

absl::Status Step(bool ok) {
  ++g_calls;
  return ok ? absl::OkStatus() : absl::NotFoundError("step failed");
}

absl::StatusOr<std::unique_ptr<int>> Make(int v) {
  ++g_calls;
  if (v < 0) return absl::InvalidArgumentError("negative");
  return std::make_unique<int>(v);
}

absl::Status TwoSteps(bool first, bool second) {
  XPU_RETURN_IF_ERROR(Step(first));
  XPU_RETURN_IF_ERROR(Step(second));
  return absl::OkStatus();
}

absl::StatusOr<int> Sum(int a, int b) {
  XPU_ASSIGN_OR_RETURN(std::unique_ptr<int> x, Make(a));  // move-only values
  XPU_ASSIGN_OR_RETURN(auto y, Make(b));
  int total = 0;
  XPU_ASSIGN_OR_RETURN(total, absl::StatusOr<int>(*x + *y));  // an existing variable
  return total;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstErrorAndEvaluatesOnce) {
  g_calls = 0;
  EXPECT_TRUE(TwoSteps(true, true).ok());
  EXPECT_EQ(g_calls, 2);
  g_calls = 0;
  absl::Status st = TwoSteps(false, true);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "step failed");
  EXPECT_EQ(g_calls, 1);
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOrReturnsTheError) {
  g_calls = 0;
  absl::StatusOr<int> ok = Sum(2, 3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 5);
  EXPECT_EQ(g_calls, 2);
  absl::StatusOr<int> bad = Sum(2, -1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "negative");
}

}  // namespace
}  // namespace xpu
