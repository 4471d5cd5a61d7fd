#include "common/timeline/summary.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/analysis/collective.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"
#include "common/json/json.h"
#include "common/record/op_kind.h"
#include "common/timeline/trace_model.h"

namespace xpu::timeline {
namespace {

// Six significant digits (the figures are estimates); NaN as 0.
double Num(double d) { return d == d ? json::Significant(d, 6) : 0.0; }

}  // namespace

TimelineSummary Summarize(const std::vector<RankDump>& ranks, const ClockAlignment& align,
                          size_t top_n) {
  TimelineSummary out;
  out.clock = align;
  if (!ranks.empty()) out.job = ranks.front().job;
  std::vector<analysis::RankTrace> traces;
  traces.reserve(ranks.size());
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const RankDump& d : ranks) {
    traces.push_back(ToRankTrace(d, align.OffsetFor(d.host)));
    for (const analysis::Op& op : traces.back().ops) {
      lo = std::min(lo, op.start_ns);
      hi = std::max(hi, op.end_ns());
    }
  }
  out.window_start_ns = lo == UINT64_MAX ? 0 : lo;
  out.window_end_ns = hi;

  // Top signatures by time, across ranks (keyed by kind + display name).
  struct Acc {
    std::string kind, name;
    uint64_t count = 0;
    double total_s = 0;
    std::set<size_t> ranks;
  };
  std::map<std::string, Acc> by_name;
  double all_s = 0;
  for (size_t ri = 0; ri < traces.size(); ++ri) {
    const analysis::RankTrace& t = traces[ri];
    std::map<uint32_t, Acc*> cache;
    for (const analysis::Op& op : t.ops) {
      Acc*& a = cache[op.sig_id];
      if (a == nullptr) {
        const analysis::OpSig* s = t.Sig(op.sig_id);
        const std::string kind = record::OpKindName(op.kind), name = EventName(*s);
        a = &by_name[kind + "\x1f" + name];
        a->kind = kind;
        a->name = name;
      }
      ++a->count;
      a->total_s += op.dur_ns * 1e-9;
      a->ranks.insert(ri);
      all_s += op.dur_ns * 1e-9;
    }
    out.ops += t.ops.size();
  }
  for (auto& [k, a] : by_name) {
    out.top.push_back(SignatureTime{a.kind, a.name, a.count, a.total_s,
                                    all_s > 0 ? a.total_s / all_s : 0,
                                    static_cast<uint32_t>(a.ranks.size())});
  }
  std::sort(out.top.begin(), out.top.end(),
            [](const SignatureTime& a, const SignatureTime& b) { return a.total_s > b.total_s; });
  if (out.top.size() > top_n) out.top.resize(top_n);

  // Per rank.
  for (size_t ri = 0; ri < traces.size(); ++ri) {
    const analysis::RankTrace& t = traces[ri];
    RankSummary r;
    r.rank = t.rank;
    r.host = t.host;
    r.exited = ranks[ri].exited;
    r.ops = t.ops.size();
    for (const analysis::Op& op : t.ops) {
      const double s = op.dur_ns * 1e-9;
      if (xpu_op_is_collective(op.kind)) {
        r.comm_s += s;
      } else if (op.kind == XPU_OP_MEMCPY) {
        r.copy_s += s;
      } else if (analysis::IsComputeKernel(op.kind)) {
        r.compute_s += s;
      } else if (analysis::IsSyncEvent(op.kind)) {
        r.sync_s += s;
      } else if (op.kind != XPU_OP_STEP && op.kind != XPU_OP_ANNOTATION &&
                 op.kind != XPU_OP_PY_CALLSITE) {
        r.host_s += s;
      }
    }
    analysis::Steps steps = analysis::FindSteps(t);
    r.step_source = analysis::StepSourceName(steps.source);
    std::vector<double> durs = steps.DurationsS();
    r.steps = durs.size();
    if (!durs.empty()) {
      r.step_mean_ms = analysis::Mean(durs) * 1e3;
      r.step_p50_ms = analysis::Median(durs) * 1e3;
      r.step_max_ms = *std::max_element(durs.begin(), durs.end()) * 1e3;
      analysis::VoidFigures v = analysis::ComputeVoid(t, steps);
      r.v_inter = v.VInter();
      r.v_minority = v.VMinority();
    }
    double flops = 0, secs = 0;
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      flops += g.flops;
      secs += g.total_ns * 1e-9;
    }
    r.gemm_tflops = secs > 0 ? flops / secs * 1e-12 : 0;
    r.issue_compute_p50_us =
        analysis::Median(analysis::IssueLatenciesUs(t, analysis::KernelFamily::kCompute));
    r.issue_comm_p50_us =
        analysis::Median(analysis::IssueLatenciesUs(t, analysis::KernelFamily::kCommunication));
    out.ranks.push_back(std::move(r));
  }

  for (const analysis::CommBandwidth& c : analysis::CommunicatorBandwidth(traces)) {
    out.comms.push_back(CommSummary{record::OpKindName(c.kind), c.comm_id, c.nranks, c.bytes,
                                    c.count, c.BusBw() * 1e-9});
  }
  std::sort(out.comms.begin(), out.comms.end(), [](const CommSummary& a, const CommSummary& b) {
    return a.count * a.bytes > b.count * b.bytes;
  });
  if (out.comms.size() > top_n) out.comms.resize(top_n);
  return out;
}

json::Json ClockJson(const ClockAlignment& a) {
  json::Json hosts = json::Json::array();
  for (const HostOffset& h : a.hosts) {
    hosts.push_back({{"host", h.host},
                     {"offset_ns", h.offset_ns},
                     {"samples", h.samples},
                     {"spread_ns", Num(h.spread_ns)},
                     {"aligned", h.aligned},
                     {"via", h.via}});
  }
  return {{"reference_rank", a.reference_rank},
          {"reference_host", a.reference_host},
          {"instances", a.instances},
          {"hosts", std::move(hosts)}};
}

std::string SummaryJson(const TimelineSummary& s) {
  json::Json top = json::Json::array();
  for (const SignatureTime& t : s.top) {
    top.push_back({{"kind", t.kind},
                   {"name", t.name},
                   {"count", t.count},
                   {"total_s", Num(t.total_s)},
                   {"share", Num(t.share)},
                   {"ranks", t.ranks}});
  }
  json::Json ranks = json::Json::array();
  for (const RankSummary& r : s.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"exited", r.exited},
                     {"ops", r.ops},
                     {"step_source", r.step_source},
                     {"steps", r.steps},
                     {"step_mean_ms", Num(r.step_mean_ms)},
                     {"step_p50_ms", Num(r.step_p50_ms)},
                     {"step_max_ms", Num(r.step_max_ms)},
                     {"compute_s", Num(r.compute_s)},
                     {"comm_s", Num(r.comm_s)},
                     {"copy_s", Num(r.copy_s)},
                     {"host_s", Num(r.host_s)},
                     {"sync_s", Num(r.sync_s)},
                     {"v_inter", Num(r.v_inter)},
                     {"v_minority", Num(r.v_minority)},
                     {"gemm_tflops", Num(r.gemm_tflops)},
                     {"issue_compute_p50_us", Num(r.issue_compute_p50_us)},
                     {"issue_comm_p50_us", Num(r.issue_comm_p50_us)}});
  }
  json::Json comms = json::Json::array();
  for (const CommSummary& c : s.comms) {
    comms.push_back({{"op", c.op},
                     {"comm_id", c.comm_id},
                     {"nranks", c.nranks},
                     {"bytes", c.bytes},
                     {"count", c.count},
                     {"busbw_gbps", Num(c.busbw_GBps)}});
  }
  json::Json o = {{"job", s.job},
                  {"window_start_ns", s.window_start_ns},
                  {"window_end_ns", s.window_end_ns},
                  {"ops", s.ops},
                  {"top", std::move(top)},
                  {"ranks", std::move(ranks)},
                  {"communicators", std::move(comms)},
                  {"clock", ClockJson(s.clock)}};
  return json::Dump(o) + "\n";
}

std::string SummaryText(const TimelineSummary& s) {
  std::string o = absl::StrFormat(
      "job %s: %d ranks, %d ops, window %.3f s\n\n", s.job, s.ranks.size(), s.ops,
      s.window_end_ns > s.window_start_ns ? (s.window_end_ns - s.window_start_ns) * 1e-9 : 0.0);
  o += "Top signatures by time (all ranks)\n";
  absl::StrAppendFormat(&o, "  %-14s %9s %11s %7s %6s  %s\n", "KIND", "COUNT", "TOTAL s", "SHARE",
                        "RANKS", "NAME");
  for (const SignatureTime& t : s.top) {
    absl::StrAppendFormat(&o, "  %-14s %9d %11.6f %6.1f%% %6d  %s\n", t.kind, t.count, t.total_s,
                          t.share * 100, t.ranks, t.name);
  }
  o += "\nPer rank (steps from the dumped window)\n";
  absl::StrAppendFormat(&o, "  %-5s %-12s %6s %9s %9s %9s %9s %9s %9s %7s %7s %8s %s\n", "RANK",
                        "HOST", "STEPS", "STEP ms", "MAX ms", "COMPUTE s", "COMM s", "HOST s",
                        "SYNC s", "VINTER", "VMINOR", "GEMM TF", "");
  for (const RankSummary& r : s.ranks) {
    absl::StrAppendFormat(
        &o, "  %-5s %-12s %6d %9.3f %9.3f %9.4f %9.4f %9.4f %9.4f %6.1f%% %6.1f%% %8.2f %s\n",
        r.rank >= 0 ? absl::StrCat(r.rank) : "-", r.host, r.steps, r.step_mean_ms, r.step_max_ms,
        r.compute_s, r.comm_s, r.host_s, r.sync_s, r.v_inter * 100, r.v_minority * 100,
        r.gemm_tflops, r.exited ? "(exited)" : "");
  }
  if (!s.comms.empty()) {
    o += "\nCommunicators (last-arrival busbw)\n";
    absl::StrAppendFormat(&o, "  %-14s %18s %6s %12s %7s %10s\n", "OP", "COMM", "RANKS", "BYTES",
                          "COUNT", "BUSBW GB/s");
    for (const CommSummary& c : s.comms) {
      absl::StrAppendFormat(&o, "  %-14s %18x %6d %12d %7d %10.2f\n", c.op, c.comm_id, c.nranks,
                            c.bytes, c.count, c.busbw_GBps);
    }
  }
  o += "\nClock offsets (reference rank " + absl::StrCat(s.clock.reference_rank) + ")\n";
  for (const HostOffset& h : s.clock.hosts) {
    absl::StrAppendFormat(
        &o, "  %-20s %+12.3f us  %s\n", h.host, h.offset_ns * 1e-3,
        h.aligned ? absl::StrCat(h.samples, " collectives") : "not aligned (no shared collective)");
  }
  return o;
}

}  // namespace xpu::timeline
