// common/logging/logging_unittest.cc
#include "common/logging/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace xpu::logging {
namespace {

constexpr uint64_t kSecond = 1000000000ull;

TEST(RateLimiterTest, BurstPerIntervalThenCountsWhatItSwallowed) {
  RateLimiter limiter(2, kSecond);
  uint64_t suppressed = 99;
  EXPECT_TRUE(limiter.Allow(10 * kSecond, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  EXPECT_TRUE(limiter.Allow(10 * kSecond + 1, &suppressed));
  EXPECT_FALSE(limiter.Allow(10 * kSecond + 2, &suppressed));
  EXPECT_FALSE(limiter.Allow(10 * kSecond + 3, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  // A new interval: allowed again, with the two swallowed events reported.
  EXPECT_TRUE(limiter.Allow(11 * kSecond + 5, &suppressed));
  EXPECT_EQ(suppressed, 2u);
}

TEST(RateLimiterTest, ClockGoingBackwardsStartsANewInterval) {
  RateLimiter limiter(1, kSecond);
  uint64_t suppressed = 0;
  EXPECT_TRUE(limiter.Allow(50 * kSecond, &suppressed));
  EXPECT_FALSE(limiter.Allow(50 * kSecond + 1, &suppressed));
  EXPECT_TRUE(limiter.Allow(10 * kSecond, &suppressed));
  EXPECT_EQ(suppressed, 1u);
}

TEST(LoggingTest, ComponentLoggersShareTheProgramSinkAndLevel) {
  const std::string dir = "/tmp/xpu_logging_test_" + std::to_string(getpid());
  const std::string file = dir + "/prog.log";
  ASSERT_TRUE(InitLogging({"prog", "warn", file}).ok());
  GetLogger("component_a")->info("not written: below the level");
  GetLogger("component_a")->warn("written by a");
  GetLogger("component_b")->error("written by b");
  spdlog::default_logger()->flush();
  GetLogger("component_a")->flush();
  GetLogger("component_b")->flush();
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  EXPECT_EQ(text.str().find("not written"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("[component_a] [warning] written by a"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("[component_b] [error] written by b"), std::string::npos) << text.str();
  std::remove(file.c_str());
  rmdir(dir.c_str());
}

TEST(LoggingTest, UnwritableFileFallsBackToStderrWithAnError) {
  absl::Status st = InitLogging({"prog", "info", "/proc/xpu-no-such-dir/x.log"});
  EXPECT_FALSE(st.ok());
  GetLogger("after_failure")->info("still logs to stderr");
}

}  // namespace
}  // namespace xpu::logging
