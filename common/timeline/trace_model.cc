#include "common/timeline/trace_model.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/record/op_kind.h"
#include "common/timeline/callsite_join.h"
#include "xpu/formulas.h"

namespace xpu::timeline {
namespace {

enum Family { kCompute = 0, kCopy = 1, kComm = 2, kHost = 3 };

Family FamilyOf(uint16_t kind) {
  if (xpu_op_is_collective(kind)) return kComm;
  if (kind == XPU_OP_MEMCPY) return kCopy;
  if (analysis::IsComputeKernel(kind)) return kCompute;
  return kHost;
}

std::string TrackName(Family f, uint16_t stream, size_t lane) {
  static const char* const kNames[] = {"GPU compute s", "GPU copy s", "GPU comm s", "host t"};
  std::string n = absl::StrCat(kNames[f], stream);
  if (lane > 0) absl::StrAppend(&n, " #", lane + 1);
  return n;
}

std::string FormatBytes(uint64_t b) {
  if (b >= (1ull << 30)) return absl::StrFormat("%.1f GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return absl::StrFormat("%.1f MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return absl::StrFormat("%.1f KiB", b / double(1ull << 10));
  return absl::StrCat(b, " B");
}

}  // namespace

std::string EventName(const analysis::OpSig& s) {
  if (s.kind == XPU_OP_GEMM) {
    std::string n = absl::StrCat(s.name.empty() ? "gemm" : s.name, " ", s.m, "x", s.n, "x", s.k);
    if (s.batch > 1) absl::StrAppend(&n, "x", s.batch);
    return n;
  }
  if (s.collective()) return absl::StrCat(record::OpKindName(s.kind), " ", FormatBytes(s.bytes));
  if (s.kind == XPU_OP_KERNEL || s.kind == XPU_OP_GRAPH_LAUNCH)
    return s.name.empty() ? record::OpKindName(s.kind) : s.name;
  if (s.kind == XPU_OP_PY_CALLSITE ||
      (s.kind == XPU_OP_ANNOTATION && s.name.find(';') != std::string::npos)) {
    // A call-site stack (annotations: as emitted by older Python packages):
    // show the innermost frame.
    return absl::StrCat("callsite ", s.name.substr(0, s.name.find(';')));
  }
  return s.name.empty() ? record::OpKindName(s.kind)
                        : absl::StrCat(record::OpKindName(s.kind), " ", s.name);
}

const std::vector<std::string>& ArgNames() {
  static const auto* names = new std::vector<std::string>{
      "seq",        "stream",           "m",     "n",      "k",         "batch",   "dtype",
      "gflop",      "tflops",           "bytes", "nranks", "comm_rank", "comm_id", "algbw_gbps",
      "busbw_gbps", "issue_latency_us", "timed", "peer",   "callsite"};
  return *names;
}

int ArgIndex(const char* name) {
  const auto& n = ArgNames();
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] == name) return static_cast<int>(i);
  }
  return -1;
}

void EventArgs(const analysis::OpSig& s, const analysis::Op& op, std::vector<Arg>* out,
               const analysis::OpSig* callsite) {
  out->clear();
  auto u = [&](const char* n, uint64_t v) { out->push_back(Arg{Arg::kUint, n, v, 0, 0, {}}); };
  auto i = [&](const char* n, int64_t v) { out->push_back(Arg{Arg::kInt, n, 0, v, 0, {}}); };
  auto d = [&](const char* n, double v) { out->push_back(Arg{Arg::kDouble, n, 0, 0, v, {}}); };
  u("seq", op.seq);
  u("stream", op.stream);
  const double secs = op.dur_ns * 1e-9;
  if (s.kind == XPU_OP_GEMM) {
    u("m", s.m);
    u("n", s.n);
    u("k", s.k);
    u("batch", s.batch);
    u("dtype", s.dtype);
    d("gflop", s.flops * 1e-9);
    if (op.timed() && secs > 0) d("tflops", s.flops / secs * 1e-12);
  } else if (s.collective()) {
    u("bytes", s.bytes);
    i("nranks", s.comm_nranks);
    i("comm_rank", s.comm_rank);
    u("comm_id", s.comm_id);
    if (s.peer >= 0) i("peer", s.peer);
    if (op.timed() && secs > 0) {
      d("algbw_gbps", s.bytes / secs * 1e-9);
      d("busbw_gbps", s.bytes * s.busbw_factor / secs * 1e-9);
    }
  }
  if (op.issue_valid()) d("issue_latency_us", op.issue_latency_ns * 1e-3);
  if (analysis::IsGpuOp(s.kind) && !op.timed()) u("timed", 0);
  if (callsite != nullptr) out->push_back(Arg{Arg::kString, "callsite", 0, 0, 0, callsite->name});
}

RankLayout LayoutRank(const RankDump& d, int64_t offset_ns) {
  RankLayout L;
  L.trace = ToRankTrace(d, offset_ns);
  const CallsiteJoin join = JoinCallsites(L.trace);
  L.callsite_links = join.links;
  L.callsite_joined = join.joined;
  // (family, stream) -> end time of each lane; (family, stream, lane) -> track.
  std::map<std::pair<int, uint16_t>, std::vector<uint64_t>> lanes;
  std::map<std::tuple<int, uint16_t, size_t>, uint32_t> track_of;
  L.slices.reserve(L.trace.ops.size() - join.links);
  for (size_t i = 0; i < L.trace.ops.size(); ++i) {
    const analysis::Op& op = L.trace.ops[i];
    // A link is metadata of its launch (its `stream` is the launch's GPU
    // stream, not a host thread): shown as the launch's argument instead.
    if (IsCallsiteLink(op)) continue;
    const Family f = FamilyOf(op.kind);
    auto& ends = lanes[{f, op.stream}];
    const bool instant = op.dur_ns == 0;
    size_t lane = 0;
    if (!instant) {
      while (lane < ends.size() && ends[lane] > op.start_ns) ++lane;
      if (lane == ends.size()) ends.push_back(0);
      ends[lane] = op.end_ns();
    }
    auto [it, inserted] = track_of.emplace(std::make_tuple(int(f), op.stream, lane),
                                           static_cast<uint32_t>(L.tracks.size()));
    if (inserted) L.tracks.push_back(TrackName(f, op.stream, lane));
    L.slices.push_back(TrackSlice{it->second, &op, instant, join.stack_of[i]});
  }
  return L;
}

void FlowIndex::Build(const std::vector<RankDump>& ranks, const ClockAlignment& align) {
  ends_.clear();
  for (size_t ri = 0; ri < ranks.size(); ++ri) {
    const RankDump& d = ranks[ri];
    const int64_t off = align.OffsetFor(d.host);
    const size_t n = d.size();
    for (size_t i = 0; i < n; ++i) {
      const xpu_record_v1 r = d.Record(i);
      auto it = d.sigs.find(r.sig_id);
      if (it == d.sigs.end() || !IsGroupCollective(it->second.kind)) continue;
      const uint64_t ts = static_cast<uint64_t>(static_cast<int64_t>(r.start_ns) - off);
      Ends& e = ends_[CollectiveFlowId(it->second.comm_id, r.seq)];
      ++e.members;
      // Ties broken by rank position so that first != last.
      if (ts < e.first_ts || (ts == e.first_ts && ri < e.first_rank)) {
        e.first_ts = ts;
        e.first_rank = ri;
      }
      if (ts > e.last_ts || (ts == e.last_ts && ri >= e.last_rank) || e.members == 1) {
        e.last_ts = ts;
        e.last_rank = ri;
      }
    }
  }
  flows_ = 0;
  for (const auto& [id, e] : ends_) flows_ += e.members >= 2;
}

FlowIndex::Role FlowIndex::RoleOf(uint64_t flow_id, size_t rank_index, uint64_t ts) const {
  auto it = ends_.find(flow_id);
  if (it == ends_.end() || it->second.members < 2) return kNone;
  const Ends& e = it->second;
  if (rank_index == e.first_rank && ts == e.first_ts) return kFirst;
  if (rank_index == e.last_rank && ts == e.last_ts) return kLast;
  return kMiddle;
}

}  // namespace xpu::timeline
