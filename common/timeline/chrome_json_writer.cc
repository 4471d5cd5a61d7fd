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
  out =
      "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"xpu timeline dump\",\"base_ns\":";
  absl::StrAppend(&out, base, ",\"reference_rank\":", align.reference_rank,
                  ",\"clock_offsets_ns\":{");
  for (size_t i = 0; i < align.hosts.size(); ++i) {
    if (i) out.push_back(',');
    AppendJsonString(&out, align.hosts[i].host);
    absl::StrAppend(&out, ":", align.hosts[i].offset_ns);
  }
  out += "}},\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&]() {
    if (!first) out += ",\n";
    first = false;
  };
  std::vector<Arg> args;
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    const int32_t pid = DisplayPid(d, ri);
    RankLayout L = LayoutRank(d, align.OffsetFor(d.host));
    begin_event();
    absl::StrAppend(&out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":0,\"args\":{\"name\":");
    AppendJsonString(&out, absl::StrCat(d.Label(), " (", d.host, " pid ", d.pid,
                                        d.exited ? ", exited" : "", ")"));
    out += "}}";
    begin_event();
    absl::StrAppend(&out, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":0,\"args\":{\"sort_index\":", ri, "}}");
    for (uint32_t t = 0; t < L.tracks.size(); ++t) {
      begin_event();
      absl::StrAppend(&out, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid,
                      ",\"tid\":", t + 1, ",\"args\":{\"name\":");
      AppendJsonString(&out, L.tracks[t]);
      out += "}}";
    }
    st.tracks += L.tracks.size();
    for (const TrackSlice& s : L.slices) {
      const analysis::Op& op = *s.op;
      const analysis::OpSig* sig = L.trace.Sig(op.sig_id);
      if (sig == nullptr) continue;
      const int64_t ts = static_cast<int64_t>(op.start_ns - base);
      begin_event();
      out += "{\"name\":";
      AppendJsonString(&out, EventName(*sig));
      absl::StrAppend(&out, ",\"cat\":\"", record::OpKindName(sig->kind), "\",\"ph\":\"",
                      s.instant ? "i" : "X", "\",\"ts\":");
      AppendUs(&out, ts);
      if (s.instant) {
        out += ",\"s\":\"t\"";
        ++st.instants;
      } else {
        out += ",\"dur\":";
        AppendUs(&out, static_cast<int64_t>(op.dur_ns));
        ++st.slices;
      }
      absl::StrAppend(&out, ",\"pid\":", pid, ",\"tid\":", s.track + 1, ",\"args\":{");
      EventArgs(*sig, op, &args, s.callsite_sig != 0 ? L.trace.Sig(s.callsite_sig) : nullptr);
      for (size_t i = 0; i < args.size(); ++i) {
        if (i) out.push_back(',');
        absl::StrAppend(&out, "\"", args[i].name, "\":");
        switch (args[i].type) {
          case Arg::kUint:
            absl::StrAppend(&out, args[i].u);
            break;
          case Arg::kInt:
            absl::StrAppend(&out, args[i].i);
            break;
          case Arg::kDouble:
            AppendDouble(&out, args[i].d);
            break;
          case Arg::kString:
            AppendJsonString(&out, args[i].s);
            break;
        }
      }
      out += "}}";
      if (IsGroupCollective(op.kind)) {
        const uint64_t fid = CollectiveFlowId(sig->comm_id, op.seq);
        const FlowIndex::Role role = flows.RoleOf(fid, ri, op.start_ns);
        if (role != FlowIndex::kNone) {
          const char* ph = role == FlowIndex::kFirst ? "s" : role == FlowIndex::kLast ? "f" : "t";
          begin_event();
          absl::StrAppend(&out, "{\"name\":\"collective\",\"cat\":\"flow\",\"ph\":\"", ph,
                          "\",\"id\":\"0x", absl::Hex(fid), "\",\"ts\":");
          AppendUs(&out, ts);
          absl::StrAppend(&out, ",\"pid\":", pid, ",\"tid\":", s.track + 1,
                          role == FlowIndex::kFirst ? "" : ",\"bp\":\"e\"", "}");
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

}  // namespace xpu::timeline
