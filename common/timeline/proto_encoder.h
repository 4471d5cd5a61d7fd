// proto_encoder — the few protobuf wire-format primitives the Perfetto trace
// writer needs (varint, fixed64, double, length-delimited), appended to a
// std::string. Encoding rules: https://protobuf.dev/programming-guides/encoding/.
// A nested message is built in its own ProtoEncoder and appended with
// Message(); messages here are small (one trace packet), so the copy is cheap
// and no length back-patching is needed.
//
// Thread-safety: a value type; one owner.
#ifndef XPU_COMMON_TIMELINE_PROTO_ENCODER_H_
#define XPU_COMMON_TIMELINE_PROTO_ENCODER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace xpu::timeline {

class ProtoEncoder {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

  void Varint(uint32_t field, uint64_t v) {
    Tag(field, kVarint);
    RawVarint(v);
  }
  // int64 fields use plain two's-complement varints (not zigzag).
  void Int64(uint32_t field, int64_t v) { Varint(field, static_cast<uint64_t>(v)); }
  void Bool(uint32_t field, bool v) { Varint(field, v ? 1 : 0); }
  void Fixed64(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    buf_.append(b, 8);
  }
  void Double(uint32_t field, double d) {
    uint64_t v;
    std::memcpy(&v, &d, sizeof(v));
    Fixed64(field, v);
  }
  void Bytes(uint32_t field, std::string_view s) {
    Tag(field, kLen);
    RawVarint(s.size());
    buf_.append(s.data(), s.size());
  }
  void Message(uint32_t field, const ProtoEncoder& m) { Bytes(field, m.buf_); }

  const std::string& data() const { return buf_; }
  size_t size() const { return buf_.size(); }
  void Clear() { buf_.clear(); }

 private:
  void Tag(uint32_t field, WireType t) { RawVarint((static_cast<uint64_t>(field) << 3) | t); }
  void RawVarint(uint64_t v) {
    char b[10];
    int n = 0;
    while (v >= 0x80) {
      b[n++] = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    b[n++] = static_cast<char>(v);
    buf_.append(b, n);
  }

  std::string buf_;
};

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_PROTO_ENCODER_H_
