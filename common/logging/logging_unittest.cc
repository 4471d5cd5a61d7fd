// common/logging/logging_unittest.cc
#include "common/logging/logging.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

TEST(LoggingTest, FileIsPrivateAndNeverASymlink) {
  char tmpl[] = "/tmp/xpu-logging-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const mode_t old = umask(0);
  const std::string file = dir + "/a.log";
  EXPECT_TRUE(InitLogging({"prog", "info", file}).ok());
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A symlink planted where the log goes is refused, its target untouched.
  const std::string target = dir + "/target";
  { std::ofstream(target) << "precious"; }
  const std::string planted = dir + "/b.log";
  ASSERT_EQ(symlink(target.c_str(), planted.c_str()), 0);
  EXPECT_FALSE(InitLogging({"prog", "info", planted}).ok());
  GetLogger("after_symlink")->info("to stderr, not the target");
  std::ifstream in(target);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "precious");
  // A directory anyone may write (not sticky): a file there could be swapped.
  const std::string open_dir = dir + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0777), 0);
  EXPECT_FALSE(InitLogging({"prog", "info", open_dir + "/c.log"}).ok());
  umask(old);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("prog"));
  for (const std::string& f : {file, planted, target, open_dir + "/c.log"}) std::remove(f.c_str());
  rmdir(open_dir.c_str());
  rmdir(dir.c_str());
}

TEST(LoggingTest, UnwritableFileFallsBackToStderrWithAnError) {
  absl::Status st = InitLogging({"prog", "info", "/proc/xpu-no-such-dir/x.log"});
  EXPECT_FALSE(st.ok());
  GetLogger("after_failure")->info("still logs to stderr");
}

}  // namespace
}  // namespace xpu::logging
