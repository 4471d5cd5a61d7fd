// tools/xpu_ring_dump_unittest.cc — runs the xpu-ring-dump binary (path in
// argv[1]) on a ring file written per ring.h and checks its text, JSON and
// CSV output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "common/ring/testing/test_ring_writer.h"

namespace xpu::ring {
namespace {

std::string g_dump_binary;

std::string RunDump(const std::string& args, int* status) {
  const std::string cmd = g_dump_binary + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

class RingDumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(g_dump_binary.empty()) << "pass the xpu-ring-dump path as argv[1]";
    testing::TestRingConfig cfg;
    cfg.ring_capacity = 8;
    cfg.job = "dump-job";
    auto w = testing::TestRingWriter::Create(cfg);
    xpu_signature_v1 shape{};
    shape.m = 4;
    shape.n = 8;
    shape.k = 16;
    shape.batch = 1;
    const uint32_t gemm = w->AddSignature(XPU_OP_GEMM, "gemm \"q\"", &shape);
    xpu_signature_v1 ar{};
    ar.count = 100;
    ar.dtype = XPU_DT_F32;
    ar.comm_nranks = 4;
    const uint32_t coll = w->AddSignature(XPU_OP_ALLREDUCE, "allreduce", &ar);
    // 10 records into 8 slots: the two oldest are overwritten.
    for (int i = 0; i < 10; ++i) {
      w->WriteOverwriting(testing::TestRingWriter::MakeRecord(
          i % 2 ? coll : gemm, 1000 + i, 7, XPU_REC_TIMED | (i == 9 ? XPU_REC_DUR_US : 0)));
    }
    char tmpl[] = "/tmp/xpu-ring-dump-XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, w->base(), w->size()), static_cast<ssize_t>(w->size()));
    close(fd);
    path_ = tmpl;
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(RingDumpTest, Text) {
  int st;
  const std::string out = RunDump(path_, &st);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("job=dump-job"), std::string::npos) << out;
  EXPECT_NE(out.find("signatures (2)"), std::string::npos) << out;
  EXPECT_NE(out.find("records (8)"), std::string::npos) << out;
  EXPECT_NE(out.find("records_written"), std::string::npos);
}

TEST_F(RingDumpTest, JsonResolvesSignatures) {
  int st;
  const std::string out = RunDump("--json " + path_, &st);
  EXPECT_EQ(st, 0) << out;
  size_t lines = 0, records = 0;
  size_t pos = 0;
  while ((pos = out.find('\n', pos)) != std::string::npos) {
    ++lines;
    ++pos;
  }
  for (size_t p = out.find("\"type\":\"record\""); p != std::string::npos;
       p = out.find("\"type\":\"record\"", p + 1))
    ++records;
  EXPECT_EQ(lines, 1u + 2u + 8u);
  EXPECT_EQ(records, 8u);
  EXPECT_NE(out.find("\"name\":\"gemm \\\"q\\\"\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"kind\":\"gemm\",\"name\":\"gemm \\\"q\\\"\",\"start_ns\":1002"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"flops\":1024"), std::string::npos);  // 2*4*8*16
  EXPECT_NE(out.find("\"bytes\":400"), std::string::npos);   // 100 * 4
  EXPECT_NE(out.find("\"start_ns\":1009,\"duration_ns\":7000"), std::string::npos)
      << out;  // us flag
}

TEST_F(RingDumpTest, CsvAndLimit) {
  int st;
  const std::string out = RunDump("--csv --limit 3 " + path_, &st);
  EXPECT_EQ(st, 0) << out;
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 4u);
  EXPECT_EQ(out.rfind("position,sig_id,kind", 0), 0u);
  EXPECT_NE(out.find("9,2,allreduce,\"allreduce\",1009,7000"), std::string::npos) << out;
}

// Call-site links (record.h XPU_OP_PY_CALLSITE) are shown with their
// launch, and a launch with its stack; the link precedes its launch here, as
// it does in a real ring (the completion thread writes the launch later).
TEST(RingDumpCallsiteTest, LinksJoinTheirLaunchByKey) {
  ASSERT_FALSE(g_dump_binary.empty());
  testing::TestRingConfig cfg;
  cfg.ring_capacity = 16;
  auto w = testing::TestRingWriter::Create(cfg);
  xpu_signature_v1 shape{};
  shape.m = shape.n = shape.k = shape.batch = 1;
  const uint32_t gemm = w->AddSignature(XPU_OP_GEMM, "cublasGemmEx", &shape);
  const uint32_t stack = w->AddSignature(XPU_OP_PY_CALLSITE, "fwd@m.py:3;main@t.py:9");
  auto rec = [](uint32_t sig, uint64_t start, uint32_t seq, uint16_t stream, int32_t lat,
                uint16_t flags) {
    xpu_record_v1 r = testing::TestRingWriter::MakeRecord(sig, start, 0, flags);
    r.seq = seq;
    r.stream = stream;
    r.issue_latency_ns = lat;
    return r;
  };
  ASSERT_TRUE(
      w->Write(rec(stack, 100, 7, 3, static_cast<int32_t>(gemm), XPU_REC_HOST)));  // @0 link
  ASSERT_TRUE(w->Write(rec(gemm, 90, 6, 3, 0, XPU_REC_TIMED)));                    // @1 other
  ASSERT_TRUE(
      w->Write(rec(gemm, 120, 7, 3, 20, XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID)));  // @2 launch
  ASSERT_TRUE(
      w->Write(rec(stack, 200, 9, 3, static_cast<int32_t>(gemm), XPU_REC_HOST)));  // @3 no launch
  char tmpl[] = "/tmp/xpu-ring-dump-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, w->base(), w->size()), static_cast<ssize_t>(w->size()));
  close(fd);
  int st;
  const std::string json = RunDump(std::string("--json ") + tmpl, &st);
  EXPECT_EQ(st, 0) << json;
  EXPECT_NE(json.find("\"kind\":\"py_callsite\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"launch\":{\"sig_id\":1,\"seq\":7,\"stream\":3,\"position\":2}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"launch\":{\"sig_id\":1,\"seq\":9,\"stream\":3,\"position\":null}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"seq\":7,\"stream\":3,\"flags\":65,\"timed\":true,\"flops\":2,\"bytes\":0,"
                      "\"comm_id\":0,"
                      "\"callsite_sig_id\":2,\"callsite\":\"fwd@m.py:3;main@t.py:9\"}"),
            std::string::npos)
      << json;
  EXPECT_EQ(
      json.find(
          "\"seq\":6,\"stream\":3,\"flags\":1,\"timed\":true,\"flops\":2,\"bytes\":0,\"comm_id\":0,"
          "\"callsite"),
      std::string::npos)
      << json;
  const std::string text = RunDump(tmpl, &st);
  EXPECT_EQ(st, 0) << text;
  EXPECT_NE(text.find("flags=0x20 launch=@2"), std::string::npos) << text;
  EXPECT_NE(text.find("flags=0x41 callsite=#2"), std::string::npos) << text;
  unlink(tmpl);
}

TEST_F(RingDumpTest, BadInputsFailCleanly) {
  int st;
  RunDump("/nonexistent/ring", &st);
  EXPECT_NE(st, 0);
  RunDump("--bogus " + path_, &st);
  EXPECT_NE(st, 0);
  const std::string help = RunDump("--help", &st);
  EXPECT_EQ(st, 0);
  EXPECT_NE(help.find("--json"), std::string::npos);
  std::ofstream(path_, std::ios::trunc) << "not a ring";
  RunDump(path_, &st);
  EXPECT_NE(st, 0);
}

}  // namespace
}  // namespace xpu::ring

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) xpu::ring::g_dump_binary = argv[1];
  return RUN_ALL_TESTS();
}
