#include "common/timeline/callsite_join.h"

#include <tuple>
#include <unordered_map>

#include "common/timeline/rank_dump.h"

namespace xpu::timeline {
namespace {

// (launch sig_id, seq, stream).
using Key = std::tuple<uint32_t, uint32_t, uint16_t>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    return static_cast<size_t>(
        Mix64((uint64_t{std::get<0>(k)} << 32 | std::get<1>(k)) ^ Mix64(std::get<2>(k))));
  }
};

uint64_t Gap(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

}  // namespace

CallsiteJoin JoinCallsites(const analysis::RankTrace& t) {
  CallsiteJoin j;
  const size_t n = t.ops.size();
  j.launch_of.assign(n, CallsiteJoin::kNone);
  j.stack_of.assign(n, 0);
  // Keys the links ask for first, so that only those launches are indexed.
  std::unordered_map<Key, std::vector<size_t>, KeyHash> wanted;
  for (size_t i = 0; i < n; ++i) {
    const analysis::Op& op = t.ops[i];
    if (!IsCallsiteLink(op)) continue;
    ++j.links;
    wanted[Key{static_cast<uint32_t>(op.issue_latency_ns), op.seq, op.stream}];
  }
  if (wanted.empty()) return j;
  for (size_t i = 0; i < n; ++i) {
    const analysis::Op& op = t.ops[i];
    if (op.kind == XPU_OP_PY_CALLSITE || (op.flags & XPU_REC_PLUGIN) != 0) continue;
    auto it = wanted.find(Key{op.sig_id, op.seq, op.stream});
    if (it != wanted.end()) it->second.push_back(i);
  }
  for (size_t i = 0; i < n; ++i) {
    const analysis::Op& link = t.ops[i];
    if (!IsCallsiteLink(link)) continue;
    const auto& cands =
        wanted[Key{static_cast<uint32_t>(link.issue_latency_ns), link.seq, link.stream}];
    size_t best = CallsiteJoin::kNone;
    for (size_t c : cands) {
      // The link's start is the CPU launch time.
      if (best == CallsiteJoin::kNone ||
          Gap(t.ops[c].launch_ns(), link.start_ns) < Gap(t.ops[best].launch_ns(), link.start_ns)) {
        best = c;
      }
    }
    if (best == CallsiteJoin::kNone) continue;
    j.launch_of[i] = best;
    if (j.stack_of[best] == 0) j.stack_of[best] = link.sig_id;
    ++j.joined;
  }
  return j;
}

}  // namespace xpu::timeline
