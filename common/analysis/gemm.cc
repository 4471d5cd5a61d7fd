#include "common/analysis/gemm.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace xpu::analysis {
namespace {

using Intervals = std::vector<std::pair<uint64_t, uint64_t>>;

// Sorted [start, end) intervals merged where they touch or overlap.
Intervals Merge(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals merged;
  for (const auto& iv : v) {
    if (!merged.empty() && iv.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, iv.second);
    } else {
      merged.push_back(iv);
    }
  }
  return merged;
}

// Whether [s, e) overlaps one of the merged intervals.
bool Overlaps(const Intervals& merged, uint64_t s, uint64_t e) {
  // First interval ending after s; it overlaps iff it starts before e.
  auto it = std::lower_bound(
      merged.begin(), merged.end(), s,
      [](const std::pair<uint64_t, uint64_t>& iv, uint64_t v) { return iv.second <= v; });
  return it != merged.end() && it->first < e;
}

// The rank's timed GPU ops (no collectives, no host intervals) per stream.
std::map<uint16_t, Intervals> GpuBusyByStream(const RankTrace& t) {
  std::map<uint16_t, Intervals> by_stream;
  for (const Op& op : t.ops) {
    if (!op.timed() || op.dur_ns == 0 || xpu_op_is_collective(op.kind) ||
        (op.flags & XPU_REC_HOST)) {
      continue;
    }
    by_stream[op.stream].emplace_back(op.start_ns, op.end_ns());
  }
  for (auto& [stream, v] : by_stream) v = Merge(std::move(v));
  return by_stream;
}

const char* DtypeName(uint8_t dt) {
  switch (dt) {
    case XPU_DT_F32:
      return "fp32";
    case XPU_DT_F16:
      return "fp16";
    case XPU_DT_BF16:
      return "bf16";
    case XPU_DT_F64:
      return "fp64";
    case XPU_DT_F8_E4M3:
      return "fp8e4m3";
    case XPU_DT_F8_E5M2:
      return "fp8e5m2";
    case XPU_DT_I8:
      return "int8";
    default:
      return "dtype";
  }
}

}  // namespace

std::string GemmKey(const OpSig& s) {
  return absl::StrCat(s.name.empty() ? "gemm" : s.name, " ", s.m, "x", s.n, "x", s.k, "x",
                      std::max(1u, s.batch), " dt", s.dtype);
}

std::map<std::string, GemmStat> GemmTflops(const RankTrace& t, uint64_t from_ns, uint64_t to_ns,
                                           bool mark_concurrent) {
  // Communication intervals on this rank, sorted by start; merged so that an
  // overlap test is one binary search. An untimed collective record spans
  // launch to the poll that saw it done, an upper bound that can cover a
  // whole step: it counts only when the rank has no timed record of the same
  // collective (sig_id, seq), which the NCCL profiler plugin supplies.
  // A collective of a one-rank communicator (a one-GPU job's DDP or FSDP
  // group) moves nothing between GPUs, a local copy at most, and NCCL gives
  // the plugin no event for it: its untimed record, an upper bound that
  // covers every GEMM of the step, does not count.
  auto one_rank_untimed = [&](const Op& op) {
    const OpSig* s = t.Sig(op.sig_id);
    return !op.timed() && s != nullptr && s->comm_nranks == 1;
  };
  // The timed collectives' (sig_id, seq), sorted for a binary search.
  std::vector<std::pair<uint32_t, uint32_t>> timed_comm;
  for (const Op& op : t.ops) {
    if (xpu_op_is_collective(op.kind) && op.timed()) timed_comm.emplace_back(op.sig_id, op.seq);
  }
  std::sort(timed_comm.begin(), timed_comm.end());
  Intervals comm;
  for (const Op& op : t.ops) {
    if (!xpu_op_is_collective(op.kind) || op.dur_ns == 0 || one_rank_untimed(op)) continue;
    if (!op.timed() &&
        std::binary_search(timed_comm.begin(), timed_comm.end(), std::make_pair(op.sig_id, op.seq)))
      continue;
    comm.emplace_back(op.start_ns, op.end_ns());
  }
  const Intervals merged = Merge(std::move(comm));
  std::map<uint16_t, Intervals> busy;
  if (mark_concurrent) busy = GpuBusyByStream(t);
  auto concurrent = [&](const Op& op) {
    for (const auto& [stream, v] : busy) {
      if (stream != op.stream && Overlaps(v, op.start_ns, op.end_ns())) return true;
    }
    return false;
  };

  std::map<std::string, GemmStat> out;
  // Each signature's entry, found once: the key's text is made per
  // signature, not per call (a window holds hundreds of calls of a few).
  std::unordered_map<uint32_t, GemmStat*> by_sig;
  for (const Op& op : t.ops) {
    if (op.kind != XPU_OP_GEMM || op.start_ns < from_ns || op.start_ns >= to_ns) continue;
    const OpSig* s = t.Sig(op.sig_id);
    if (s == nullptr || s->flops <= 0) continue;
    GemmStat*& slot = by_sig[op.sig_id];
    if (slot == nullptr) {
      std::string key = GemmKey(*s);
      slot = &out[key];
      if (slot->key.empty()) {
        slot->key = std::move(key);
        slot->sig = *s;
      }
    }
    GemmStat& g = *slot;
    if (!op.timed() || op.dur_ns == 0) {
      ++g.excluded_untimed;
      continue;
    }
    if (Overlaps(merged, op.start_ns, op.end_ns())) {
      ++g.excluded_overlap;
      continue;
    }
    ++g.count;
    g.total_ns += op.dur_ns;
    g.flops += s->flops;
    g.call_tflops.push_back(s->flops / (static_cast<double>(op.dur_ns) * 1e-9) / 1e12);
    if (mark_concurrent) {
      g.call_concurrent.push_back(concurrent(op) ? 1 : 0);
      g.call_issue_us.push_back(op.issue_valid() ? static_cast<float>(op.issue_latency_ns) * 1e-3f
                                                 : -1.0f);
    }
  }
  return out;
}

uint32_t AlignmentElements(uint8_t dtype) {
  uint32_t size = xpu_dtype_size(dtype);
  if (size == 0) size = 2;
  return std::max(8u, 128u / size);
}

std::vector<std::string> AlignmentIssues(const OpSig& s) {
  std::vector<std::string> out;
  const uint32_t a = AlignmentElements(s.dtype);
  const std::pair<const char*, uint32_t> dims[] = {{"m", s.m}, {"n", s.n}, {"k", s.k}};
  for (const auto& [name, v] : dims) {
    if (v == 0 || v % a == 0) continue;
    uint32_t up = (v + a - 1) / a * a;
    out.push_back(absl::StrCat(name, "=", v, " is not a multiple of ", a, " elements (",
                               DtypeName(s.dtype), "); padding to ", up, " would align it"));
  }
  return out;
}

}  // namespace xpu::analysis
