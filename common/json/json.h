// common/json/json.h — how XPUTimer writes JSON: nlohmann-json (one JSON
// library for every program), keys in snake_case, fields in the order they
// are added (nlohmann::ordered_json), compact output, and strings that are
// always valid UTF-8: bytes that are not (a truncated kernel name, a
// Latin-1 host name) become U+FFFD instead of failing the whole document.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_JSON_JSON_H_
#define XPU_COMMON_JSON_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace xpu::json {

using Json = nlohmann::ordered_json;

// `j` as compact JSON text (no trailing newline); invalid UTF-8 in strings is
// replaced by U+FFFD. `indent` >= 0 pretty-prints with that many spaces.
std::string Dump(const Json& j, int indent = -1);

// `s` as a JSON string literal, quotes included.
std::string Quote(std::string_view s);

// `v` rounded to `digits` significant digits (as printf's %.<digits>g), so
// that reports do not carry float noise; NaN and infinities stay as they are
// (Dump writes them as null).
double Significant(double v, int digits);
// `v` rounded to `decimals` decimal places (as printf's %.<decimals>f).
double Fixed(double v, int decimals);

// A count held in a double (flops, bytes): an exact integer when it is one
// and fits in 64 bits, else the double.
Json Count(double v);

}  // namespace xpu::json

#endif  // XPU_COMMON_JSON_JSON_H_
