// common/record/op_kind_unittest.cc — the op-kind table against the ABI
// header it names and against the Python copy the pipeline tests keep.
#include "common/record/op_kind.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "xpu/record.h"

namespace xpu::record {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text between `open` and the next `close` after it.
std::string Block(const std::string& text, const std::string& open, const std::string& close) {
  const size_t b = text.find(open);
  if (b == std::string::npos) return "";
  const size_t e = text.find(close, b + open.size());
  return e == std::string::npos ? "" : text.substr(b, e - b);
}

TEST(OpKindTest, EveryEnumeratorOfTheAbiHeaderHasItsLowerCaseName) {
  const std::string header = ReadFile(XPU_SOURCE_DIR "/include/xpu/record.h");
  const std::string body = Block(header, "enum xpu_op_kind {", "};");
  ASSERT_FALSE(body.empty()) << "enum xpu_op_kind not found in include/xpu/record.h";
  std::map<uint32_t, std::string> from_header;
  const std::regex enumerator(R"(XPU_OP_([A-Z0-9_]+)\s*=\s*([0-9]+))");
  for (std::sregex_iterator it(body.begin(), body.end(), enumerator), end; it != end; ++it) {
    std::string name = (*it)[1];
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name != "none") from_header[static_cast<uint32_t>(std::stoul((*it)[2]))] = name;
  }
  ASSERT_GE(from_header.size(), 20u);
  std::map<uint32_t, std::string> from_table;
  for (const OpKindEntry& k : AllOpKinds()) from_table[k.kind] = std::string(k.name);
  EXPECT_EQ(from_table, from_header);
}

TEST(OpKindTest, NamesAreUniqueAndLookupsAgree) {
  std::set<std::string_view> names;
  for (const OpKindEntry& k : AllOpKinds()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    EXPECT_EQ(KnownOpKindName(k.kind), k.name);
    EXPECT_EQ(OpKindName(k.kind), k.name);
    EXPECT_TRUE(IsKnownOpKind(k.kind));
  }
  EXPECT_EQ(OpKindName(XPU_OP_GRAPH_LAUNCH), "graph_launch");
  EXPECT_EQ(OpKindName(XPU_OP_SYNC_STREAM), "sync_stream");
}

TEST(OpKindTest, ValuesOutsideTheAbiAreUnknown) {
  for (uint32_t kind :
       {0u, 5u, 15u, 26u, 39u, 43u, 47u, 50u, 63u, 73u, 95u, 127u, 128u, 65535u, 0xffffffffu}) {
    EXPECT_FALSE(IsKnownOpKind(kind)) << kind;
    EXPECT_TRUE(KnownOpKindName(kind).empty()) << kind;
    EXPECT_EQ(OpKindName(kind), "op" + std::to_string(kind));
  }
}

// tests/e2e_pipeline/pipeline_harness.py maps each traced API to the kind
// name xpu-ring-dump prints; every name there must be one of this table.
TEST(OpKindTest, PipelineHarnessUsesTheSameNames) {
  const std::string py = ReadFile(XPU_SOURCE_DIR "/tests/e2e_pipeline/pipeline_harness.py");
  const std::string apis = Block(py, "TRACED_APIS = {", "}");
  ASSERT_FALSE(apis.empty()) << "TRACED_APIS not found in pipeline_harness.py";
  std::set<std::string_view> names;
  for (const OpKindEntry& k : AllOpKinds()) names.insert(k.name);
  const std::regex entry(R"x("[A-Za-z_0-9]+"\s*:\s*"([a-z_0-9]+)")x");
  int seen = 0;
  for (std::sregex_iterator it(apis.begin(), apis.end(), entry), end; it != end; ++it, ++seen) {
    const std::string name = (*it)[1];
    EXPECT_TRUE(names.count(name)) << "pipeline_harness.py names kind '" << name
                                   << "', which common/record/op_kind.cc does not define";
  }
  EXPECT_GE(seen, 5);
}

}  // namespace
}  // namespace xpu::record
