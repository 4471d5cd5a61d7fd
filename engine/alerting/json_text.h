// json_text — the little JSON text writing the alerting payloads need:
// string escaping and RFC 3339 timestamps. Pure functions.
#ifndef XPU_ENGINE_ALERTING_JSON_TEXT_H_
#define XPU_ENGINE_ALERTING_JSON_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace xpu::engine {

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);
// ns since the Unix epoch as RFC 3339 UTC with milliseconds,
// e.g. "2026-11-22T02:46:48.123Z".
std::string Rfc3339(uint64_t ns);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_JSON_TEXT_H_
