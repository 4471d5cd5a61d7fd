// common/json/json.cc — see json.h.
#include "common/json/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace xpu::json {

std::string Dump(const Json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string Quote(std::string_view s) { return Dump(Json(std::string(s))); }

double Significant(double v, int digits) {
  if (!std::isfinite(v)) return v;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return std::strtod(buf, nullptr);
}

double Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  char buf[400];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return std::strtod(buf, nullptr);
}

Json Count(double v) {
  if (std::isfinite(v) && v >= 0 && v < 18446744073709551616.0 && v == std::floor(v)) {
    return Json(static_cast<uint64_t>(v));
  }
  return Json(v);
}

}  // namespace xpu::json
