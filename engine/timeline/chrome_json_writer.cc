#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/json/json.h"
#include "engine/timeline/trace_model.h"
#include "engine/timeline/trace_writer.h"

namespace xpu::engine::timeline {
namespace {

using ::xpu::json::Json;

// Nanoseconds as the microseconds Chrome traces count in.
double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// One trace event (or the header) as a line of the file.
void AppendEvent(std::string* out, const Json& e) { out->append(::xpu::json::Dump(e)); }

Json ArgValue(const Arg& a) {
  switch (a.type) {
    case Arg::kUint:
      return a.u;
    case Arg::kInt:
      return a.i;
    case Arg::kDouble:
      return a.d;  // NaN and infinities become null
    case Arg::kString:
      return a.s;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<TraceStats> WriteChromeJson(const std::vector<RankDump>& ranks,
                                           const ClockAlignment& align, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot open ", path));
  FlowIndex flows;
  flows.Build(ranks, align);
  // Base time: the earliest aligned start of any op.
  uint64_t base = UINT64_MAX;
  for (const RankDump& d : ranks) {
    const int64_t off = align.OffsetFor(d.host);
    for (size_t i = 0; i < d.size(); ++i) {
      const uint64_t ts = static_cast<uint64_t>(static_cast<int64_t>(d.Record(i).start_ns) - off);
      if (ts < base) base = ts;
    }
  }
  if (base == UINT64_MAX) base = 0;

  TraceStats st;
  st.ranks = ranks.size();
  std::string out;
  bool failed = false;
  uint64_t bytes = 0;
  auto flush = [&](bool force) {
    if (!force && out.size() < (1 << 20)) return;
    if (std::fwrite(out.data(), 1, out.size(), f) != out.size()) failed = true;
    bytes += out.size();
    out.clear();
  };
  // The header and the opening of traceEvents by hand (the events stream
  // after it, one nlohmann object each, so that memory stays flat).
  Json offsets = Json::object();
  for (const HostOffset& h : align.hosts) offsets[h.host] = h.offset_ns;
  Json other = {{"generator", "xpu timeline dump"},
                {"base_ns", base},
                {"reference_rank", align.reference_rank},
                {"clock_offsets_ns", std::move(offsets)}};
  out = "{\"displayTimeUnit\":\"ns\",\"otherData\":";
  AppendEvent(&out, other);
  out += ",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const Json& e) {
    if (!first) out += ",\n";
    first = false;
    AppendEvent(&out, e);
  };
  std::vector<Arg> args;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    const int32_t pid = DisplayPid(d, ri);
    RankLayout L = LayoutRank(d, align.OffsetFor(d.host));
    emit({{"name", "process_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", 0},
          {"args",
           {{"name", absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                  d.exited ? ", exited" : "", ")")}}}});
    emit({{"name", "process_sort_index"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", 0},
          {"args", {{"sort_index", ri}}}});
    for (uint32_t t = 0; t < L.tracks.size(); ++t) {
      emit({{"name", "thread_name"},
            {"ph", "M"},
            {"pid", pid},
            {"tid", t + 1},
            {"args", {{"name", L.tracks[t]}}}});
    }
    st.tracks += L.tracks.size();
    for (const TrackSlice& s : L.slices) {
      const analysis::Op& op = *s.op;
      const analysis::OpSig* sig = L.trace.Sig(op.sig_id);
      if (sig == nullptr) continue;
      const int64_t ts = static_cast<int64_t>(op.start_ns - base);
      Json e = {{"name", EventName(*sig)},
                {"cat", KindName(sig->kind)},
                {"ph", s.instant ? "i" : "X"},
                {"ts", Us(ts)}};
      if (s.instant) {
        e["s"] = "t";
        ++st.instants;
      } else {
        e["dur"] = Us(static_cast<int64_t>(op.dur_ns));
        ++st.slices;
      }
      e["pid"] = pid;
      e["tid"] = s.track + 1;
      EventArgs(*sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
      Json a = Json::object();
      for (const Arg& arg : args) a[arg.name] = ArgValue(arg);
      e["args"] = std::move(a);
      emit(e);
      if (IsGroupCollective(op.kind)) {
        const uint64_t fid = CollectiveFlowId(sig->comm_id, op.seq);
        const FlowIndex::Role role = flows.RoleOf(fid, ri, op.start_ns);
        if (role != FlowIndex::kNone) {
          const char* ph = role == FlowIndex::kFirst ? "s" : role == FlowIndex::kLast ? "f" : "t";
          Json flow = {{"name", "collective"},
                       {"cat", "flow"},
                       {"ph", ph},
                       {"id", absl::StrCat("0x", absl::Hex(fid))},
                       {"ts", Us(ts)},
                       {"pid", pid},
                       {"tid", s.track + 1}};
          if (role != FlowIndex::kFirst) flow["bp"] = "e";
          emit(flow);
          ++st.flow_events;
        }
      }
      flush(false);
    }
  }
  out += "\n]}\n";
  flush(true);
  st.bytes = bytes;
  if (std::fclose(f) != 0 || failed)
    return absl::InternalError(absl::StrCat("cannot write ", path));
  return st;
}

}  // namespace xpu::engine::timeline
