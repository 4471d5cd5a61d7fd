#include "engine/window/detector_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"

namespace xpu::engine {
namespace {

TEST(DetectorConfigTest, DefaultsOverridesAndBackbones) {
  DetectorConfig c;
  EXPECT_DOUBLE_EQ(c.Get("throughput.threshold"), 0.05);
  auto p = DetectorConfig::Parse(R"(
# thresholds for our cluster
void_inter.threshold = 0.2
void_inter.threshold@megatron = 0.08   # per backbone
slow_gpu.min_drop=0.25
)");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->Get("void_inter.threshold"), 0.2);
  EXPECT_DOUBLE_EQ(p->Get("void_inter.threshold", "megatron"), 0.08);
  EXPECT_DOUBLE_EQ(p->Get("void_inter.threshold", "deepspeed"), 0.2);
  EXPECT_DOUBLE_EQ(p->Get("slow_gpu.min_drop"), 0.25);
  EXPECT_DOUBLE_EQ(p->Get("slow_gpu.mad_k"), 5);
}

TEST(DetectorConfigTest, RejectsUnknownKeysAndBadNumbers) {
  EXPECT_FALSE(DetectorConfig::Parse("no_such.key = 1").ok());
  EXPECT_FALSE(DetectorConfig::Parse("slow_gpu.min_drop = lots").ok());
  EXPECT_FALSE(DetectorConfig::Parse("slow_gpu.min_drop").ok());
  EXPECT_FALSE(DetectorConfig::Load("/nonexistent/xpu.conf").ok());
}

TEST(DetectorConfigTest, RetiredKeysAreIgnoredNotRefused) {
  absl::StatusOr<DetectorConfig> c = DetectorConfig::Parse(
      "issue_stall.max_syncs_per_step = 3\nslow_gpu.min_drop = 0.3\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->Get("slow_gpu.min_drop"), 0.3);
}

TEST(DetectorConfigTest, EveryDefaultIsDocumented) {
  for (const DetectorParam& p : DetectorDefaults()) {
    EXPECT_NE(std::string(p.meaning), "") << p.key;
  }
}

TEST(DetectorConfigTest, EngineRefusesBadConfigAndUrlsAtStart) {
  EngineOptions o = testing::TestOptions();
  o.detector_config = testing::TempPath("bad.conf");
  { std::ofstream(o.detector_config) << "no_such.key = 1\n"; }
  auto e = Engine::Start(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("no_such.key"), std::string::npos) << e.status();
  o = testing::TestOptions();
  o.alertmanager_url = "ftp://am:9093";  // not http(s)
  EXPECT_FALSE(Engine::Start(o).ok());
  o = testing::TestOptions();
  o.detector_config = testing::TempPath("good.conf");
  { std::ofstream(o.detector_config) << "slow_gpu.min_drop = 0.2\n"; }
  EXPECT_TRUE(Engine::Start(o).ok());
}

}  // namespace
}  // namespace xpu::engine
