#include "tools/xpu_cli/json_writer.h"

#include <cstdio>

namespace xpu::cli {

std::string JsonWriter::Quote(std::string_view s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          o += buf;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o + "\"";
}

void JsonWriter::Key(std::string_view key) {
  if (!first_.back()) out_ += ",";
  first_.back() = false;
  if (!key.empty()) out_ += Quote(key) + ":";
}

JsonWriter& JsonWriter::BeginObject(std::string_view key) {
  Key(key);
  out_ += "{";
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_ += "}";
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginArray(std::string_view key) {
  Key(key);
  out_ += "[";
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_ += "]";
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::Field(std::string_view key, std::string_view v) {
  Key(key);
  out_ += Quote(v);
  return *this;
}
JsonWriter& JsonWriter::Field(std::string_view key, int64_t v) {
  Key(key);
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::Field(std::string_view key, uint64_t v) {
  Key(key);
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::Field(std::string_view key, bool v) {
  Key(key);
  out_ += v ? "true" : "false";
  return *this;
}

}  // namespace xpu::cli
