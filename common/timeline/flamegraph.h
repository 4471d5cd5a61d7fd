// flamegraph — kernel call-site flame graphs from Python call stacks.
//
// Stacks are XPU_OP_PY_CALLSITE signatures whose name is a list of
// "qualname@file:line" frames joined by ';', innermost first (include/xpu/
// record.h; python/xputimer/callsite.py names them the same way). Each
// call-site record is one sample of its stack, tied to the GPU op it launched:
//
//   1. exact: the hook's link records (sampled GEMMs, collectives and p2p
//      issued with the GIL held) carry their launch's (sig_id, seq, stream)
//      and are joined by that key (callsite_join.h). A link whose launch is
//      not in the dump is unlinked; it is never guessed;
//   2. fallback, only for free-standing call-site events emitted from
//      Python (xputimer.emit_callsite(), no launch key; also XPU_OP_ANNOTATION
//      stacks from older Python packages): the first GPU op of the rank
//      launched (start - issue latency, when valid) within `max_gap_ns` after
//      the event that no other sample claimed. Useful for launches the hook
//      does not stack (plain kernels, e.g. a custom Triton kernel preceded by
//      emit_callsite()); counted apart (linked_nearby).
//
// A linked sample weighs the op's GPU time and ends in a leaf frame
// "[gemm] <name>" / "[allreduce] ..." / "[kernel] <symbol>"; it is coloured by
// that kind (GEMM / collective / other). Samples that link to nothing weigh
// `unlinked_weight_ns` (1 µs by default) and end in "[unlinked]".
//
// Folded format (Brendan Gregg's): "outer;...;inner;leaf <weight>" per line.
// The SVG writer is self-contained (no scripts): one <rect> + <title> per
// frame, width proportional to weight.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_TIMELINE_FLAMEGRAPH_H_
#define XPU_COMMON_TIMELINE_FLAMEGRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/timeline/rank_dump.h"

namespace xpu::timeline {

enum class FrameKind { kOther = 0, kGemm = 1, kCollective = 2 };

struct FoldedStack {
  uint64_t weight = 0;  // ns of GPU time (linked) or unlinked_weight_ns per sample
  uint64_t samples = 0;
  FrameKind kind = FrameKind::kOther;
};

struct CallsiteOptions {
  uint64_t max_gap_ns = 2000000;  // 2 ms
  uint64_t unlinked_weight_ns = 1000;
};

struct CallsiteStats {
  uint64_t samples = 0;        // call-site records seen (links + free-standing events)
  uint64_t linked_exact = 0;   // links joined to their launch by key
  uint64_t linked_nearby = 0;  // free-standing events placed by launch time (fallback)
  uint64_t unlinked = 0;       // links without their launch in the dump; events with none nearby
};

// Folded stack text (outermost frame first, ';'-joined, leaf last) -> data.
std::map<std::string, FoldedStack> BuildCallsiteStacks(const std::vector<RankDump>& ranks,
                                                       const CallsiteOptions& opt,
                                                       CallsiteStats* stats);
// True when `name` looks like a call-site stack (every frame "x@y:line").
bool IsCallsiteName(const std::string& name);

std::string FoldedText(const std::map<std::string, FoldedStack>& stacks);
std::string FlameGraphSvg(const std::map<std::string, FoldedStack>& stacks,
                          const std::string& title, int width = 1200);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_FLAMEGRAPH_H_
