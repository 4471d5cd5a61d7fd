#include "engine/hang/fold_silence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xpu::engine::hang {
namespace {

using ::testing::HasSubstr;

Diagnosis Make(const std::string& kind, Severity s, const std::string& evidence) {
  Diagnosis d;
  d.job = "j";
  d.kind = kind;
  d.severity = s;
  d.evidence = evidence;
  return d;
}

TEST(FoldSilenceTest, SilenceDuringAHangIsPartOfTheHang) {
  std::vector<Diagnosis> v = {
      Make("rank_silent", Severity::kWarning, "1 of 2 live processes sent no records"),
      Make("hang_non_communication", Severity::kCritical, "rank 1 stopped"),
      Make("void_inter", Severity::kWarning, "other")};
  EXPECT_EQ(FoldSilenceIntoHang(&v), 1);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].kind, "hang_non_communication");
  EXPECT_THAT(v[0].evidence, HasSubstr("rank 1 stopped"));
  EXPECT_THAT(v[0].evidence, HasSubstr("silent (same hang, not reported apart): 1 of 2 live"));
  EXPECT_EQ(v[1].kind, "void_inter");
}

TEST(FoldSilenceTest, SilenceWithoutAHangVerdictStays) {
  // No hang, or only a busy-wait look (info: not a fault yet).
  std::vector<Diagnosis> v = {Make("rank_silent", Severity::kCritical, "2 of 2")};
  EXPECT_EQ(FoldSilenceIntoHang(&v), 0);
  EXPECT_EQ(v.size(), 1u);
  v.push_back(Make("hang_busy_wait", Severity::kInfo, "spinning"));
  EXPECT_EQ(FoldSilenceIntoHang(&v), 0);
  EXPECT_EQ(v.size(), 2u);
}

}  // namespace
}  // namespace xpu::engine::hang
