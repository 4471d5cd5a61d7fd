#include "tools/xpu_cli/timeline_cli.h"

#include <gtest/gtest.h>

#include <sstream>

#include "tools/xpu_cli/cli.h"

namespace xpu::cli {
namespace {

TEST(TimelineCliTest, RankLists) {
  std::vector<int32_t> r;
  ASSERT_TRUE(ParseRankList("0-3,12,2", &r));
  EXPECT_EQ(r, (std::vector<int32_t>{0, 1, 2, 3, 12}));
  EXPECT_FALSE(ParseRankList("", &r));
  EXPECT_FALSE(ParseRankList("3-1", &r));
  EXPECT_FALSE(ParseRankList("a", &r));
  EXPECT_FALSE(ParseRankList("-1", &r));
  EXPECT_FALSE(ParseRankList("0-99999999", &r));
}

TEST(TimelineCliTest, Since) {
  uint64_t s = 0;
  const uint64_t now = 1000ull * 1000000000ull;
  ASSERT_TRUE(ParseSince("90s", now, &s));
  EXPECT_EQ(s, now - 90ull * 1000000000ull);
  ASSERT_TRUE(ParseSince("5m", now, &s));
  EXPECT_EQ(s, now - 300ull * 1000000000ull);
  ASSERT_TRUE(ParseSince("250ms", now, &s));
  EXPECT_EQ(s, now - 250000000ull);
  ASSERT_TRUE(ParseSince("2h", now, &s));
  EXPECT_EQ(s, 0u);  // older than "now": clamped
  ASSERT_TRUE(ParseSince("1700000000000000000", now, &s));
  EXPECT_EQ(s, 1700000000000000000ull);
  EXPECT_FALSE(ParseSince("yesterday", now, &s));
}

TEST(TimelineCliTest, Dispatch) {
  auto is_timeline = [](std::vector<std::string> args) {
    return ParsedCommand(args) == "timeline";
  };
  EXPECT_TRUE(is_timeline({"timeline", "dump"}));
  EXPECT_TRUE(is_timeline({"--engine", "h:1", "timeline"}));
  EXPECT_FALSE(is_timeline({"stacks", "--job", "j"}));  // hang_cli.cc
  EXPECT_TRUE(is_timeline({"--job", "timeline", "timeline"}));
  EXPECT_FALSE(is_timeline({"--job", "timeline", "ranks"}));
  EXPECT_FALSE(is_timeline({"status"}));
}

int RunTl(std::vector<std::string> args, std::string* out, std::string* err) {
  std::ostringstream o, e;
  int rc = RunCli(args, "127.0.0.1:1", o, e);
  *out = o.str();
  *err = e.str();
  return rc;
}

TEST(TimelineCliTest, UsageErrors) {
  std::string out, err;
  EXPECT_EQ(RunTl({"timeline", "dump"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("--job JOB is required"), std::string::npos);
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--format", "svg"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--last", "5", "--since", "5m"}, &out, &err),
            kExitUsage);
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--ranks", "x"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--before", "soon"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("bad --before"), std::string::npos);
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--since", "1700000000000000000", "--before",
                   "1600000000000000000"},
                  &out, &err),
            kExitUsage);
  EXPECT_NE(err.find("--before must be later than --since"), std::string::npos);
  EXPECT_EQ(RunTl({"timeline", "summary"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunTl({"timeline", "summary", "--in", "/tmp", "--top", "0"}, &out, &err), kExitUsage);
  EXPECT_NE(err.find("--top wants a positive number"), std::string::npos);
  EXPECT_EQ(RunTl({"timeline", "frobnicate"}, &out, &err), kExitUsage);
  EXPECT_EQ(RunTl({"timeline", "--help"}, &out, &err), kExitOk);
  EXPECT_NE(out.find("xpu timeline dump --job JOB"), std::string::npos);
  EXPECT_EQ(RunTl({"timeline", "summary", "--in", "/nonexistent/dir"}, &out, &err),
            kExitEngineError);
  EXPECT_NE(err.find("no dump in"), std::string::npos);
  // Unreachable engine (port 1): exit 2.
  EXPECT_EQ(RunTl({"timeline", "dump", "--job", "j", "--out", "/tmp/xpu_tl_unreach"}, &out, &err),
            kExitUnreachable);
}

}  // namespace
}  // namespace xpu::cli
