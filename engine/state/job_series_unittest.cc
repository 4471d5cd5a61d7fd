#include "engine/state/job_series.h"

#include <gtest/gtest.h>

#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace xpu::engine {
namespace {

std::string Text(prometheus::Registry& r) { return prometheus::TextSerializer().Serialize(r.Collect()); }

TEST(JobSeriesTest, RetireRemovesEveryTrackedSeriesAndBlocksNewOnesUntilRevived) {
  prometheus::Registry reg;
  auto& g = prometheus::BuildGauge().Name("xpu_t").Help("t").Register(reg);
  JobSeries s;
  s.Get("a", g, {{"xpu_job", "a"}, {"rank", "0"}})->Set(1);
  s.Get("a", g, {{"xpu_job", "a"}, {"rank", "1"}})->Set(2);
  s.Get("b", g, {{"xpu_job", "b"}, {"rank", "0"}})->Set(3);
  EXPECT_EQ(s.Count("a"), 2u);
  s.RetireJob("a");
  EXPECT_TRUE(s.Retired("a"));
  EXPECT_EQ(s.Count("a"), 0u);
  const std::string t = Text(reg);
  EXPECT_EQ(t.find("xpu_job=\"a\""), std::string::npos) << t;
  EXPECT_NE(t.find("xpu_t{rank=\"0\",xpu_job=\"b\"} 3"), std::string::npos) << t;
  EXPECT_EQ(s.Get("a", g, {{"xpu_job", "a"}, {"rank", "0"}}), nullptr);
  s.ReviveJob("a");
  ASSERT_NE(s.Get("a", g, {{"xpu_job", "a"}, {"rank", "0"}}), nullptr);
  EXPECT_EQ(s.Count("a"), 1u);
  s.ForgetJob("b");
  EXPECT_EQ(Text(reg).find("xpu_job=\"b\""), std::string::npos);
}

TEST(JobSeriesTest, NewLabelsOfASlotReplaceTheOldSeries) {
  prometheus::Registry reg;
  auto& g = prometheus::BuildGauge().Name("xpu_t").Help("t").Register(reg);
  JobSeries s;
  s.Get("a", g, "rank0", {{"xpu_job", "a"}, {"rank", "0"}})->Set(1);
  s.Get("a", g, "rank0", {{"xpu_job", "a"}, {"rank", "0"}, {"UUID", "GPU-1"}})->Set(2);
  const std::string t = Text(reg);
  EXPECT_EQ(t.find("xpu_t{rank=\"0\",xpu_job=\"a\"}"), std::string::npos) << t;
  EXPECT_NE(t.find("xpu_t{UUID=\"GPU-1\",rank=\"0\",xpu_job=\"a\"} 2"), std::string::npos) << t;
  s.Remove("a", g, "rank0");
  EXPECT_EQ(Text(reg).find("xpu_t{"), std::string::npos);
  EXPECT_EQ(s.Count("a"), 0u);
}

TEST(JobSeriesTest, LabelsHashSeesEveryNameAndValueAndWhereTheyEnd) {
  const prometheus::Labels l = {{"xpu_job", "a"}, {"rank", "0"}};
  EXPECT_EQ(JobSeries::LabelsHash(l), JobSeries::LabelsHash({{"rank", "0"}, {"xpu_job", "a"}}));
  EXPECT_NE(JobSeries::LabelsHash(l), JobSeries::LabelsHash({{"xpu_job", "a"}, {"rank", "1"}}));
  EXPECT_NE(JobSeries::LabelsHash({{"a", "bc"}}), JobSeries::LabelsHash({{"ab", "c"}}));
  EXPECT_NE(JobSeries::LabelsHash({{"a", "b"}, {"c", ""}}), JobSeries::LabelsHash({{"a", "b"}}));
}

TEST(JobSeriesTest, RankLabelsUseDcgmExporterNamesAndLeaveUnknownsOut) {
  xpu::v1::ProcessIdentity id;
  id.set_host("node-7");
  id.set_device(3);
  prometheus::Labels l = RankLabels(JobLabels("j1", "llm"), "12", id);
  EXPECT_EQ(l, (prometheus::Labels{
                   {"xpu_job", "j1"}, {"xpu_job_name", "llm"}, {"rank", "12"}, {"Hostname", "node-7"}}));
  id.set_gpu_model("NVIDIA H100 80GB HBM3");
  id.set_gpu_uuid("GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  l = RankLabels(JobLabels("j1", "llm"), "12", id);
  EXPECT_EQ(l.at("gpu"), "3");  // the device ordinal while the daemon did not map it
  EXPECT_EQ(l.at("UUID"), "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52");
  EXPECT_EQ(l.at("modelName"), "NVIDIA H100 80GB HBM3");
  id.set_gpu_index(5);
  EXPECT_EQ(RankLabels(JobLabels("j1", "llm"), "12", id).at("gpu"), "5");
}

}  // namespace
}  // namespace xpu::engine
