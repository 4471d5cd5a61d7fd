#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/json/json.h"
#include "common/record/op_kind.h"
#include "common/timeline/trace_model.h"
#include "common/timeline/trace_writer.h"
#include "common/timeline/private_output.h"

namespace xpu::timeline {
namespace {

using ::xpu::json::Json;

// Nanoseconds as the microseconds Chrome traces count in.
double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

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

// Base time: the earliest aligned start of any op (0 without ops).
uint64_t BaseTime(const std::vector<RankDump>& ranks, const ClockAlignment& align) {
  uint64_t base = UINT64_MAX;
  for (const RankDump& d : ranks) {
    const int64_t off = align.OffsetFor(d.host);
    for (size_t i = 0; i < d.size(); ++i) {
      const uint64_t ts = static_cast<uint64_t>(static_cast<int64_t>(d.Record(i).start_ns) - off);
      if (ts < base) base = ts;
    }
  }
  return base == UINT64_MAX ? 0 : base;
}

// The trace file being written: one nlohmann object per event, appended to a
// buffer that is written out in chunks of about 1 MiB, so memory stays flat.
struct ChromeOut {
  explicit ChromeOut(FILE* file) : f(file) {}
  void Emit(const Json& e) {
    if (!first) out += ",\n";
    first = false;
    out += ::xpu::json::Dump(e);
  }
  void Flush(bool force) {
    if (!force && out.size() < (1 << 20)) return;
    if (std::fwrite(out.data(), 1, out.size(), f) != out.size()) failed = true;
    bytes += out.size();
    out.clear();
  }

  FILE* f;
  std::string out;
  bool first = true;
  bool failed = false;
  uint64_t bytes = 0;
};

// Everything before the first event: units, base time and clock offsets,
// and the opening of traceEvents (written by hand: the events stream after it).
void AppendHeader(uint64_t base, const ClockAlignment& align, std::string* out) {
  Json offsets = Json::object();
  for (const HostOffset& h : align.hosts) offsets[h.host] = h.offset_ns;
  const Json other = {{"generator", "xpu timeline dump"},
                      {"base_ns", base},
                      {"reference_rank", align.reference_rank},
                      {"clock_offsets_ns", std::move(offsets)}};
  *out = "{\"displayTimeUnit\":\"ns\",\"otherData\":";
  *out += ::xpu::json::Dump(other);
  *out += ",\"traceEvents\":[\n";
}

// The rank's process name and sort index, and its threads' (tracks') names.
void EmitRankMetadata(const RankDump& d, size_t ri, int32_t pid, const RankLayout& L,
                      ChromeOut& o) {
  o.Emit({{"name", "process_name"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", 0},
          {"args",
           {{"name", absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                  d.exited ? ", exited" : "", ")")}}}});
  o.Emit({{"name", "process_sort_index"},
          {"ph", "M"},
          {"pid", pid},
          {"tid", 0},
          {"args", {{"sort_index", ri}}}});
  for (uint32_t t = 0; t < L.tracks.size(); ++t) {
    o.Emit({{"name", "thread_name"},
            {"ph", "M"},
            {"pid", pid},
            {"tid", t + 1},
            {"args", {{"name", L.tracks[t]}}}});
  }
}

// One complete ("X") or instant ("i") event of rank `ri`, and, for a group
// collective, its flow event linking the members across ranks.
void EmitSlice(size_t ri, int32_t pid, const RankLayout& L, const TrackSlice& s,
               const analysis::OpSig& sig, uint64_t base, const FlowIndex& flows,
               std::vector<Arg>& args, ChromeOut& o, TraceStats& st) {
  const analysis::Op& op = *s.op;
  const int64_t ts = static_cast<int64_t>(op.start_ns - base);
  Json e = {{"name", EventName(sig)},
            {"cat", record::OpKindName(sig.kind)},
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
  EventArgs(sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
  Json a = Json::object();
  for (const Arg& arg : args) a[arg.name] = ArgValue(arg);
  e["args"] = std::move(a);
  o.Emit(e);
  if (!IsGroupCollective(op.kind)) return;
  const uint64_t fid = CollectiveFlowId(sig.comm_id, op.seq);
  const FlowIndex::Role role = flows.RoleOf(fid, ri, op.start_ns);
  if (role == FlowIndex::kNone) return;
  const char* ph = role == FlowIndex::kFirst ? "s" : role == FlowIndex::kLast ? "f" : "t";
  Json flow = {{"name", "collective"},
               {"cat", "flow"},
               {"ph", ph},
               {"id", absl::StrCat("0x", absl::Hex(fid))},
               {"ts", Us(ts)},
               {"pid", pid},
               {"tid", s.track + 1}};
  if (role != FlowIndex::kFirst) flow["bp"] = "e";
  o.Emit(flow);
  ++st.flow_events;
}

}  // namespace

absl::StatusOr<TraceStats> WriteChromeJson(const std::vector<RankDump>& ranks,
                                           const ClockAlignment& align, const std::string& path) {
  absl::StatusOr<FILE*> opened = OpenPrivateFile(path);  // 0600, no symlink
  if (!opened.ok()) return opened.status();
  FILE* f = *opened;
  FlowIndex flows;
  flows.Build(ranks, align);
  const uint64_t base = BaseTime(ranks, align);
  TraceStats st;
  st.ranks = ranks.size();
  ChromeOut o(f);
  AppendHeader(base, align, &o.out);
  std::vector<Arg> args;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    const int32_t pid = DisplayPid(d, ri);
    RankLayout L = LayoutRank(d, align.OffsetFor(d.host));
    EmitRankMetadata(d, ri, pid, L, o);
    st.tracks += L.tracks.size();
    for (const TrackSlice& s : L.slices) {
      const analysis::OpSig* sig = L.trace.Sig(s.op->sig_id);
      if (sig == nullptr) continue;
      EmitSlice(ri, pid, L, s, *sig, base, flows, args, o, st);
      o.Flush(false);
    }
  }
  o.out += "\n]}\n";
  o.Flush(true);
  st.bytes = o.bytes;
  if (std::fclose(f) != 0 || o.failed)
    return absl::InternalError(absl::StrCat("cannot write ", path));
  return st;
}

}  // namespace xpu::timeline
