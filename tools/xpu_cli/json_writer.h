// json_writer — a small streaming JSON writer for the CLI's --json output
// (field order is the order written, which keeps the output stable).
#ifndef XPU_TOOLS_XPU_CLI_JSON_WRITER_H_
#define XPU_TOOLS_XPU_CLI_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xpu::cli {

class JsonWriter {
 public:
  JsonWriter& BeginObject(std::string_view key = {});
  JsonWriter& EndObject();
  JsonWriter& BeginArray(std::string_view key = {});
  JsonWriter& EndArray();
  JsonWriter& Field(std::string_view key, std::string_view v);
  JsonWriter& Field(std::string_view key, const char* v) { return Field(key, std::string_view(v)); }
  JsonWriter& Field(std::string_view key, int64_t v);
  JsonWriter& Field(std::string_view key, uint64_t v);
  JsonWriter& Field(std::string_view key, int32_t v) { return Field(key, static_cast<int64_t>(v)); }
  JsonWriter& Field(std::string_view key, uint32_t v) {
    return Field(key, static_cast<uint64_t>(v));
  }
  JsonWriter& Field(std::string_view key, bool v);
  const std::string& str() const { return out_; }
  static std::string Quote(std::string_view s);

 private:
  void Key(std::string_view key);
  std::string out_;
  std::vector<bool> first_{true};
};

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_JSON_WRITER_H_
