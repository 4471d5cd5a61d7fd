#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record/op_kind.h"
#include "common/timeline/trace_model.h"
#include "common/timeline/trace_writer.h"

namespace xpu::timeline {
namespace {

void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// Nanoseconds as microseconds with three decimals, exactly.
void AppendUs(std::string* out, int64_t ns) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  absl::StrAppendFormat(out, "%d.%03d", ns / 1000, ns % 1000);
}

void AppendDouble(std::string* out, double d) {
  if (!(d == d) || d == std::numeric_limits<double>::infinity() ||
      d == -std::numeric_limits<double>::infinity()) {
    out->append("null");
    return;
  }
  absl::StrAppendFormat(out, "%.6g", d);
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

// The trace file being written: events go to a buffer that is written out
// in chunks of about 1 MiB.
struct ChromeOut {
  explicit ChromeOut(FILE* file) : f(file) {}
  // Starts the next element of traceEvents.
  void BeginEvent() {
    if (!first) out += ",\n";
    first = false;
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

// Everything before the first event: units, base time and clock offsets.
void AppendHeader(uint64_t base, const ClockAlignment& align, std::string* out) {
  *out =
      "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"xpu timeline dump\",\"base_ns\":";
  absl::StrAppend(out, base, ",\"reference_rank\":", align.reference_rank,
                  ",\"clock_offsets_ns\":{");
  for (size_t i = 0; i < align.hosts.size(); ++i) {
    if (i) out->push_back(',');
    AppendJsonString(out, align.hosts[i].host);
    absl::StrAppend(out, ":", align.hosts[i].offset_ns);
  }
  *out += "}},\"traceEvents\":[\n";
}

// The rank's process name and sort index, and its threads' (tracks') names.
void AppendRankMetadata(const RankDump& d, size_t ri, int32_t pid, const RankLayout& L,
                        ChromeOut& o) {
  o.BeginEvent();
  absl::StrAppend(&o.out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                  ",\"tid\":0,\"args\":{\"name\":");
  AppendJsonString(&o.out, absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                        d.exited ? ", exited" : "", ")"));
  o.out += "}}";
  o.BeginEvent();
  absl::StrAppend(&o.out, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid,
                  ",\"tid\":0,\"args\":{\"sort_index\":", ri, "}}");
  for (uint32_t t = 0; t < L.tracks.size(); ++t) {
    o.BeginEvent();
    absl::StrAppend(&o.out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":", t + 1, ",\"args\":{\"name\":");
    AppendJsonString(&o.out, L.tracks[t]);
    o.out += "}}";
  }
}

// An event's "args" members.
void AppendArgs(const std::vector<Arg>& args, std::string* out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out->push_back(',');
    absl::StrAppend(out, "\"", args[i].name, "\":");
    switch (args[i].type) {
      case Arg::kUint:
        absl::StrAppend(out, args[i].u);
        break;
      case Arg::kInt:
        absl::StrAppend(out, args[i].i);
        break;
      case Arg::kDouble:
        AppendDouble(out, args[i].d);
        break;
      case Arg::kString:
        AppendJsonString(out, args[i].s);
        break;
    }
  }
}

// One complete ("X") or instant ("i") event of rank `ri`, and, for a group
// collective, its flow event linking the members across ranks.
void AppendSlice(size_t ri, int32_t pid, const RankLayout& L, const TrackSlice& s,
                 const analysis::OpSig& sig, uint64_t base, const FlowIndex& flows,
                 std::vector<Arg>& args, ChromeOut& o, TraceStats& st) {
  const analysis::Op& op = *s.op;
  const int64_t ts = static_cast<int64_t>(op.start_ns - base);
  o.BeginEvent();
  o.out += "{\"name\":";
  AppendJsonString(&o.out, EventName(sig));
  absl::StrAppend(&o.out, ",\"cat\":\"", record::OpKindName(sig.kind), "\",\"ph\":\"", s.instant ? "i" : "X",
                  "\",\"ts\":");
  AppendUs(&o.out, ts);
  if (s.instant) {
    o.out += ",\"s\":\"t\"";
    ++st.instants;
  } else {
    o.out += ",\"dur\":";
    AppendUs(&o.out, static_cast<int64_t>(op.dur_ns));
    ++st.slices;
  }
  absl::StrAppend(&o.out, ",\"pid\":", pid, ",\"tid\":", s.track + 1, ",\"args\":{");
  EventArgs(sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
  AppendArgs(args, &o.out);
  o.out += "}}";
  if (!IsGroupCollective(op.kind)) return;
  const uint64_t fid = CollectiveFlowId(sig.comm_id, op.seq);
  const FlowIndex::Role role = flows.RoleOf(fid, ri, op.start_ns);
  if (role == FlowIndex::kNone) return;
  const char* ph = role == FlowIndex::kFirst ? "s" : role == FlowIndex::kLast ? "f" : "t";
  o.BeginEvent();
  absl::StrAppend(&o.out, "{\"name\":\"collective\",\"cat\":\"flow\",\"ph\":\"", ph,
                  "\",\"id\":\"0x", absl::Hex(fid), "\",\"ts\":");
  AppendUs(&o.out, ts);
  absl::StrAppend(&o.out, ",\"pid\":", pid, ",\"tid\":", s.track + 1,
                  role == FlowIndex::kFirst ? "" : ",\"bp\":\"e\"", "}");
  ++st.flow_events;
}

}  // namespace

absl::StatusOr<TraceStats> WriteChromeJson(const std::vector<RankDump>& ranks,
                                           const ClockAlignment& align, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot open ", path));
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
    AppendRankMetadata(d, ri, pid, L, o);
    st.tracks += L.tracks.size();
    for (const TrackSlice& s : L.slices) {
      const analysis::OpSig* sig = L.trace.Sig(s.op->sig_id);
      if (sig == nullptr) continue;
      AppendSlice(ri, pid, L, s, *sig, base, flows, args, o, st);
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
