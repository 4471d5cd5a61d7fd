// The wire format of xpu.v1 does not change when the .proto files are
// reorganised: every message, field (number, type, label, packing, oneof),
// enum value and service method of package xpu.v1 in proto/xpu/v1/*.proto,
// read from the sources with protoc's own parser, must match
// proto/xpu/v1/wire_format.golden, which was written from the single
// xpu.proto before the split by service. Adding a field changes the golden
// file on purpose: regenerate it with XPU_UPDATE_WIRE_GOLDEN=1 and review the
// diff (only additions are compatible, and the removal of a field whose
// number stays reserved).
#include <dirent.h>
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "xpu/v1/common.pb.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::ServiceDescriptor;

class Errors : public google::protobuf::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column,
                const std::string& message) override {
    text += file + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
            message + "\n";
  }
  std::string text;
};

std::string FieldType(const FieldDescriptor* f) {
  if (f->message_type() != nullptr) return f->message_type()->full_name();
  if (f->enum_type() != nullptr) return f->enum_type()->full_name();
  return f->type_name();
}

void DescribeEnum(const EnumDescriptor* e, std::map<std::string, std::string>* out) {
  std::ostringstream o;
  o << "enum " << e->full_name() << "\n";
  for (int i = 0; i < e->value_count(); ++i) {
    o << "  " << e->value(i)->number() << " " << e->value(i)->name() << "\n";
  }
  (*out)[e->full_name()] = o.str();
}

void DescribeMessage(const Descriptor* m, std::map<std::string, std::string>* out) {
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < m->field_count(); ++i) fields.push_back(m->field(i));
  std::sort(fields.begin(), fields.end(), [](const FieldDescriptor* a, const FieldDescriptor* b) {
    return a->number() < b->number();
  });
  std::ostringstream o;
  o << "message " << m->full_name() << "\n";
  for (const FieldDescriptor* f : fields) {
    o << "  " << f->number() << " " << f->name() << " " << FieldType(f) << " "
      << (f->is_repeated() ? "repeated" : "singular") << (f->is_packed() ? " packed" : "")
      << (f->has_presence() ? " presence" : "");
    if (f->real_containing_oneof() != nullptr) o << " oneof=" << f->real_containing_oneof()->name();
    o << " json=" << f->json_name() << "\n";
  }
  for (int i = 0; i < m->reserved_range_count(); ++i) {
    o << "  reserved " << m->reserved_range(i)->start << ".." << m->reserved_range(i)->end << "\n";
  }
  (*out)[m->full_name()] = o.str();
  for (int i = 0; i < m->nested_type_count(); ++i) DescribeMessage(m->nested_type(i), out);
  for (int i = 0; i < m->enum_type_count(); ++i) DescribeEnum(m->enum_type(i), out);
}

void DescribeService(const ServiceDescriptor* s, std::map<std::string, std::string>* out) {
  std::ostringstream o;
  o << "service " << s->full_name() << "\n";
  for (int i = 0; i < s->method_count(); ++i) {
    const auto* m = s->method(i);
    o << "  rpc " << m->name() << "(" << (m->client_streaming() ? "stream " : "")
      << m->input_type()->full_name() << ") returns (" << (m->server_streaming() ? "stream " : "")
      << m->output_type()->full_name() << ")\n";
  }
  (*out)[s->full_name()] = o.str();
}

// Everything package xpu.v1 puts on the wire, sorted by full name.
std::string DescribeWire(std::string* errors) {
  std::vector<std::string> files;
  const std::string dir = std::string(XPU_PROTO_DIR) + "/xpu/v1";
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 6 && name.compare(name.size() - 6, 6, ".proto") == 0) {
        files.push_back("xpu/v1/" + name);
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  google::protobuf::compiler::DiskSourceTree tree;
  tree.MapPath("", XPU_PROTO_DIR);
  Errors collector;
  google::protobuf::compiler::Importer importer(&tree, &collector);
  std::map<std::string, std::string> parts;
  for (const std::string& f : files) {
    const FileDescriptor* fd = importer.Import(f);
    if (fd == nullptr) continue;
    EXPECT_EQ(fd->package(), "xpu.v1") << f;
    for (int i = 0; i < fd->message_type_count(); ++i) DescribeMessage(fd->message_type(i), &parts);
    for (int i = 0; i < fd->enum_type_count(); ++i) DescribeEnum(fd->enum_type(i), &parts);
    for (int i = 0; i < fd->service_count(); ++i) DescribeService(fd->service(i), &parts);
  }
  *errors = collector.text;
  std::string out;
  for (const auto& [name, part] : parts) out += part;
  return out;
}

TEST(WireFormatTest, PackageXpuV1IsUnchanged) {
  std::string errors;
  const std::string now = DescribeWire(&errors);
  ASSERT_TRUE(errors.empty()) << errors;
  ASSERT_FALSE(now.empty());
  const std::string golden_path = std::string(XPU_PROTO_DIR) + "/xpu/v1/wire_format.golden";
  if (const char* u = std::getenv("XPU_UPDATE_WIRE_GOLDEN"); u != nullptr && *u == '1') {
    std::ofstream(golden_path) << now;
  }
  std::ifstream in(golden_path);
  ASSERT_TRUE(in) << "missing " << golden_path;
  std::stringstream golden;
  golden << in.rdbuf();
  // Line by line, so that a failure names what moved.
  std::istringstream a(golden.str()), b(now);
  std::string la, lb;
  int line = 0;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    ++line;
    if (!more_a && !more_b) break;
    ASSERT_EQ(more_a ? la : "<end>", more_b ? lb : "<end>")
        << "line " << line << " of " << golden_path;
  }
}

// ProcessBatch field 7 (the per-signature window sums earlier daemons sent)
// is reserved: such a batch still parses, with every other field intact.
TEST(WireFormatTest, AnEarlierDaemonsWindowSumsAreSkipped) {
  xpu::v1::ProcessBatch pb;
  pb.set_process_key(42);
  pb.set_records(std::string(64, '\x01'));
  pb.set_exited(true);
  std::string wire = pb.SerializeAsString();
  // Field 7, length-delimited: a WindowSummary {window_start_ns: 5, stats: {count: 3}}.
  const std::string summary = std::string("\x08\x05\x1a\x02\x10\x03", 6);
  wire += std::string("\x3a", 1) + static_cast<char>(summary.size()) + summary;
  xpu::v1::ProcessBatch back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.process_key(), 42u);
  EXPECT_EQ(back.records().size(), 64u);
  EXPECT_TRUE(back.exited());
}

}  // namespace
