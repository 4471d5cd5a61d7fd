#include "tools/xpu_cli/timeline_cli.h"

#include <gtest/gtest.h>

#include <algorithm>
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

xpu::v1::RanksReply JobOf(int ranks, int per_host) {
  xpu::v1::RanksReply r;
  for (int i = 0; i < ranks; ++i) {
    xpu::v1::RankInfo* info = r.add_ranks();
    info->set_rank(i);
    info->set_host("node" + std::to_string(i / per_host));
  }
  return r;
}

void AddDiagnosis(xpu::v1::DiagnosesReply* d, const std::string& kind, std::vector<int32_t> ranks,
                  bool active = true) {
  xpu::v1::DiagnosisInfo* g = d->add_diagnoses();
  g->set_kind(kind);
  g->set_active(active);
  for (int32_t r : ranks) g->add_ranks(r);
}

TEST(TimelineCliTest, SmallJobsAreDumpedWhole) {
  const RankSelection s = SelectDefaultRanks(JobOf(64, 8), xpu::v1::DiagnosesReply(), 64);
  EXPECT_TRUE(s.ranks.empty());
  EXPECT_EQ(s.total, 64u);
}

TEST(TimelineCliTest, LargeJobsGetSuspectsPeersAndASpread) {
  xpu::v1::DiagnosesReply d;
  AddDiagnosis(&d, "slow_gpu", {3700});
  std::vector<int32_t> everyone;
  for (int i = 0; i < 10000; ++i) everyone.push_back(i);
  AddDiagnosis(&d, "throughput_regression", everyone);  // job-wide: singles out nobody
  AddDiagnosis(&d, "slow_link", {12}, /*active=*/false);  // resolved: not a suspect
  const RankSelection s = SelectDefaultRanks(JobOf(10000, 8), d, 64);
  ASSERT_EQ(s.ranks.size(), 64u);
  EXPECT_EQ(s.total, 10000u);
  EXPECT_EQ(s.suspects, 1u);
  EXPECT_EQ(s.suspect_text, "3700 (slow_gpu)");
  // Its host (3696-3703) and its neighbours (already on the host).
  for (int32_t r = 3696; r <= 3703; ++r) {
    EXPECT_TRUE(std::binary_search(s.ranks.begin(), s.ranks.end(), r)) << r;
  }
  EXPECT_EQ(s.peers, 7u);
  EXPECT_EQ(s.spread, 56u);
  EXPECT_EQ(s.ranks.front(), 0);  // the clock reference
  EXPECT_GT(s.ranks.back(), 9000);  // spread over the whole job
  EXPECT_TRUE(std::is_sorted(s.ranks.begin(), s.ranks.end()));
}

TEST(TimelineCliTest, ManySuspectsKeepRoomForPeersAndSpread) {
  xpu::v1::DiagnosesReply d;
  for (int i = 0; i < 16; ++i) AddDiagnosis(&d, "hang_non_communication", {i * 100 + 5});
  const RankSelection s = SelectDefaultRanks(JobOf(2000, 4), d, 16);
  ASSERT_EQ(s.ranks.size(), 16u);
  EXPECT_EQ(s.suspects, 8u);  // at most half of the selection
  EXPECT_EQ(s.peers, 4u);     // up to three quarters
  EXPECT_EQ(s.spread, 4u);    // the rest spread across the job
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
