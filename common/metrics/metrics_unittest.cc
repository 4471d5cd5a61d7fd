#include <gtest/gtest.h>

#include "common/metrics/exposition.h"
#include "common/metrics/process_collector.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace xpu::metrics {
namespace {

TEST(ProcStatTest, ParsesFieldsAfterACommandWithSpacesAndParens) {
  // Fields 1..24 of a real /proc/<pid>/stat line; the command is "(a) b)".
  const std::string line =
      "4242 ((a) b)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 "
      "123456 987654321 2048 18446744073709551615";
  ProcStat st;
  ASSERT_TRUE(ParseProcStat(line, &st));
  EXPECT_EQ(st.utime_ticks, 250);
  EXPECT_EQ(st.stime_ticks, 50);
  EXPECT_EQ(st.starttime_ticks, 123456);
  EXPECT_EQ(st.vsize_bytes, 987654321);
  EXPECT_EQ(st.rss_pages, 2048);
  EXPECT_FALSE(ParseProcStat("4242 (short) S 1 2", &st));
  EXPECT_FALSE(ParseProcStat("no parenthesis at all", &st));
}

TEST(ProcessCollectorTest, ExportsTheStandardProcessMetricsAndBuildInfo) {
  ProcessCollector c("engine", "1.2.3");
  prometheus::Registry reg;
  prometheus::BuildCounter().Name("xpu_test_total").Help("t").Register(reg).Add({}).Increment(3);
  const std::string text = Render({&reg, &c});
  EXPECT_NE(text.find("xpu_test_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("xpu_build_info{component=\"engine\",version=\"1.2.3\"} 1"),
            std::string::npos)
      << text;
  for (const char* name :
       {"# TYPE process_cpu_seconds_total counter", "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_virtual_memory_bytes gauge", "# TYPE process_start_time_seconds gauge",
        "# TYPE process_open_fds gauge", "# TYPE process_max_fds gauge"}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
  }
  // The process started after the machine booted, and before now.
  const size_t at = text.find("\nprocess_start_time_seconds ");
  ASSERT_NE(at, std::string::npos);
  const double start = std::stod(text.substr(at + 28));
  EXPECT_GT(start, 1.6e9);
  EXPECT_LE(start, static_cast<double>(time(nullptr)) + 1);
}

}  // namespace
}  // namespace xpu::metrics
