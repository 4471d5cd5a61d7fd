// xpu-trace-validate — test tool: validates a Perfetto (--perfetto FILE) or
// Chrome JSON (--json FILE) trace with trace_validator.h and prints the
// result as one JSON object. Exit 0 when valid, 1 when not, 64 on usage.
#include <cstdio>
#include <string>

#include "common/timeline/testing/trace_validator.h"

using xpu::timeline::testing::ValidatedTrace;

static std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    if (c < 0x20) continue;
    o.push_back(static_cast<char>(c));
  }
  return o + "\"";
}

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "--perfetto" && std::string(argv[1]) != "--json")) {
    std::fprintf(stderr, "usage: xpu-trace-validate --perfetto|--json FILE\n");
    return 64;
  }
  const bool perfetto = std::string(argv[1]) == "--perfetto";
  ValidatedTrace v = perfetto ? xpu::timeline::testing::ValidatePerfettoFile(argv[2])
                              : xpu::timeline::testing::ValidateChromeJsonFile(argv[2]);
  std::string o = "{\"ok\":" + std::string(v.ok() ? "true" : "false") + ",\"errors\":[";
  for (size_t i = 0; i < v.errors.size() && i < 20; ++i) o += (i ? "," : "") + Quote(v.errors[i]);
  o += "],\"packets\":" + std::to_string(v.packets) +
       ",\"processes\":" + std::to_string(v.processes) + ",\"tracks\":" + std::to_string(v.tracks) +
       ",\"slices\":" + std::to_string(v.slices) + ",\"instants\":" + std::to_string(v.instants) +
       ",\"flows\":" + std::to_string(v.flows) +
       ",\"min_ts\":" + std::to_string(v.min_ts == UINT64_MAX ? 0 : v.min_ts) +
       ",\"max_ts\":" + std::to_string(v.max_ts) + ",\"process_names\":{";
  bool first = true;
  for (const auto& [pid, name] : v.process_names) {
    o += (first ? "" : ",") + Quote(std::to_string(pid)) + ":" + Quote(name);
    first = false;
  }
  o += "},\"events_by_pid\":{";
  first = true;
  for (const auto& [pid, n] : v.events_by_pid) {
    o += (first ? "" : ",") + Quote(std::to_string(pid)) + ":" + std::to_string(n);
    first = false;
  }
  o += "},\"names\":{";
  first = true;
  for (const auto& [name, n] : v.slices_by_name) {
    o += (first ? "" : ",") + Quote(name) + ":" + std::to_string(n);
    first = false;
  }
  o += "},\"callsites\":{";
  first = true;
  for (const auto& [key, n] : v.callsites) {
    o += (first ? "" : ",") + Quote(key) + ":" + std::to_string(n);
    first = false;
  }
  o += "}}\n";
  std::fputs(o.c_str(), stdout);
  return v.ok() ? 0 : 1;
}
