#include "common/timeline/dump_outputs.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/json/json.h"
#include "common/timeline/summary.h"
#include "common/timeline/private_output.h"

namespace xpu::timeline {
namespace {

using ::xpu::json::Json;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  return WritePrivateFile(path, text);  // job data: 0600, never through a symlink
}

Json StatsJson(const TraceStats& s) {
  return {{"tracks", s.tracks},
          {"slices", s.slices},
          {"instants", s.instants},
          {"flow_events", s.flow_events},
          {"bytes", s.bytes}};
}

}  // namespace

bool ParseTraceFormat(const std::string& s, TraceFormat* f) {
  if (s == "perfetto")
    *f = TraceFormat::kPerfetto;
  else if (s == "json")
    *f = TraceFormat::kJson;
  else if (s == "both")
    *f = TraceFormat::kBoth;
  else if (s == "auto")
    *f = TraceFormat::kAuto;
  else
    return false;
  return true;
}

absl::StatusOr<DumpOutputs> WriteDumpOutputs(const std::string& dir,
                                             const std::vector<RankDump>& ranks, TraceFormat format,
                                             const DumpContext& ctx) {
  XPU_RETURN_IF_ERROR(MakePrivateDir(dir));
  DumpOutputs o;
  for (const RankDump& d : ranks) {
    o.ops += d.size();
    o.packed_bytes += d.packed.size();
  }
  auto t0 = std::chrono::steady_clock::now();
  o.clock = EstimateClockOffsets(ranks);
  o.align_s = Since(t0);
  const bool perfetto = format != TraceFormat::kJson;
  const bool json = format == TraceFormat::kJson || format == TraceFormat::kBoth ||
                    (format == TraceFormat::kAuto && o.ops <= kAutoJsonMaxOps);
  if (perfetto) {
    t0 = std::chrono::steady_clock::now();
    o.perfetto_path = dir + "/trace.perfetto-trace";
    XPU_ASSIGN_OR_RETURN(o.perfetto, WritePerfettoTrace(ranks, o.clock, o.perfetto_path));
    o.perfetto_s = Since(t0);
  }
  if (json) {
    t0 = std::chrono::steady_clock::now();
    o.json_path = dir + "/trace.json";
    XPU_ASSIGN_OR_RETURN(o.json, WriteChromeJson(ranks, o.clock, o.json_path));
    o.json_s = Since(t0);
  }
  t0 = std::chrono::steady_clock::now();
  std::map<std::string, FoldedStack> stacks =
      BuildCallsiteStacks(ranks, CallsiteOptions(), &o.callsites);
  if (!stacks.empty()) {
    o.folded_path = dir + "/callsites.folded";
    o.svg_path = dir + "/callsites.svg";
    XPU_RETURN_IF_ERROR(WriteText(o.folded_path, FoldedText(stacks)));
    std::string title =
        absl::StrCat("Kernel call sites, job ", ctx.job, " (", o.callsites.samples, " samples, ",
                     o.callsites.linked_exact, " linked to their launch");
    if (o.callsites.linked_nearby != 0) {
      absl::StrAppend(&title, ", ", o.callsites.linked_nearby, " placed by launch time");
    }
    title += ")";
    XPU_RETURN_IF_ERROR(WriteText(o.svg_path, FlameGraphSvg(stacks, title)));
  }
  o.flame_s = Since(t0);

  Json processes = Json::array();
  for (const RankDump& d : ranks) {
    processes.push_back({{"rank", d.rank},
                         {"host", d.host},
                         {"pid", d.pid},
                         {"exited", d.exited},
                         {"records", d.size()},
                         {"signatures", d.sigs.size()}});
  }
  Json m = {{"job", ctx.job},
            {"ranks_requested", ctx.ranks_requested},
            {"selection", ctx.selection},
            {"ranks_left_out", ctx.ranks_left_out},
            {"last_n", ctx.last_n},
            {"since_ns", ctx.since_ns},
            {"until_ns", ctx.until_ns},
            {"next_before_ns", ctx.next_before_ns},
            {"ranks_total", ctx.ranks_total},
            {"ranks_answered", ctx.ranks_answered},
            {"missing", ctx.missing},
            {"from_engine", ctx.from_engine},
            {"truncated_daemons", ctx.truncated_daemons},
            {"processes", std::move(processes)},
            {"ops", o.ops},
            {"packed_bytes", o.packed_bytes},
            {"clock", ClockJson(o.clock)},
            {"files",
             {{"perfetto", o.perfetto_path},
              {"json", o.json_path},
              {"folded", o.folded_path},
              {"svg", o.svg_path}}}};
  if (perfetto) m["perfetto"] = StatsJson(o.perfetto);
  if (json) m["json"] = StatsJson(o.json);
  m["callsites"] = {{"samples", o.callsites.samples},
                    {"linked_exact", o.callsites.linked_exact},
                    {"linked_nearby", o.callsites.linked_nearby},
                    {"unlinked", o.callsites.unlinked}};
  m["seconds"] = {{"fetch", ctx.fetch_s},
                  {"align", o.align_s},
                  {"perfetto", o.perfetto_s},
                  {"json", o.json_s},
                  {"flamegraph", o.flame_s}};
  o.manifest_path = dir + "/dump.json";
  XPU_RETURN_IF_ERROR(WriteText(o.manifest_path, ::xpu::json::Dump(m) + "\n"));
  return o;
}

}  // namespace xpu::timeline
