// xpu-trace-validate — test tool: validates a Perfetto (--perfetto FILE) or
// Chrome JSON (--json FILE) trace with trace_validator.h and prints the
// result as one JSON object. Exit 0 when valid, 1 when not, 64 on usage.
#include <cstdio>
#include <string>

#include "common/cli/flags.h"
#include "common/json/json.h"
#include "common/timeline/testing/trace_validator.h"

using xpu::timeline::testing::ValidatedTrace;
using xpu::json::Json;

int main(int argc, char** argv) {
  CLI::App app(
      "xpu-trace-validate: checks a trace written by `xpu timeline dump` and prints "
      "what it holds as JSON.");
  xpu::flags::Configure(app, "xpu-trace-validate");
  std::string perfetto, chrome;
  auto* p = app.add_option("--perfetto", perfetto, "Perfetto trace to validate")->type_name("FILE");
  auto* j =
      app.add_option("--json", chrome, "Chrome trace-event JSON to validate")->type_name("FILE");
  p->excludes(j);
  app.footer("Exit codes: 0 valid, 1 not valid, 64 usage.");
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 64); rc >= 0) return rc;
  if (perfetto.empty() == chrome.empty()) {
    std::fputs("xpu-trace-validate: give --perfetto FILE or --json FILE\n", stderr);
    return 64;
  }
  ValidatedTrace v = !perfetto.empty()
                         ? xpu::timeline::testing::ValidatePerfettoFile(perfetto)
                         : xpu::timeline::testing::ValidateChromeJsonFile(chrome);
  Json errors = Json::array();
  for (size_t i = 0; i < v.errors.size() && i < 20; ++i) errors.push_back(v.errors[i]);
  Json process_names = Json::object();
  for (const auto& [pid, name] : v.process_names) process_names[std::to_string(pid)] = name;
  Json events_by_pid = Json::object();
  for (const auto& [pid, n] : v.events_by_pid) events_by_pid[std::to_string(pid)] = n;
  Json o = {{"ok", v.ok()},
            {"errors", std::move(errors)},
            {"packets", v.packets},
            {"processes", v.processes},
            {"tracks", v.tracks},
            {"slices", v.slices},
            {"instants", v.instants},
            {"flows", v.flows},
            {"min_ts", v.min_ts == UINT64_MAX ? 0 : v.min_ts},
            {"max_ts", v.max_ts},
            {"process_names", std::move(process_names)},
            {"events_by_pid", std::move(events_by_pid)},
            {"names", v.slices_by_name},
            {"callsites", v.callsites}};
  std::fputs((xpu::json::Dump(o) + "\n").c_str(), stdout);
  return v.ok() ? 0 : 1;
}
