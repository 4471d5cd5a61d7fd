#include "engine/state/collective_table.h"

#include <algorithm>

#include "common/analysis/collective.h"
#include "xpu/formulas.h"

namespace xpu::engine {

void CollectiveTable::Add(const SignatureInfo& sig, int32_t rank, const xpu_record_v1& r) {
  const uint64_t comm_id = sig.abi.comm_id;
  Key key{comm_id, r.seq};
  auto [it, inserted] = entries_.try_emplace(key);
  CollectiveEntry& e = it->second;
  if (inserted) {
    e.comm_id = comm_id;
    e.seq = r.seq;
    e.kind = sig.abi.kind;
    e.nranks = sig.abi.comm_nranks;
    e.bytes = sig.bytes;
    e.busbw_factor = sig.busbw_factor;
    e.members.reserve(std::max(1, std::min(e.nranks, 1024)));
    std::deque<uint32_t>& order = order_[comm_id];
    order.push_back(r.seq);
    while (order.size() > max_seqs_per_comm_) {
      entries_.erase(Key{comm_id, order.front()});
      order.pop_front();
    }
  }
  CollectiveMember m;
  m.rank = rank;
  m.comm_rank = sig.abi.comm_rank;
  m.start_ns = r.start_ns;
  m.duration_ns = xpu_record_duration_ns(&r);
  m.issue_latency_valid = (r.flags & XPU_REC_ISSUE_LAT_VALID) != 0;
  m.issue_latency_ns = r.issue_latency_ns;
  m.timed = (r.flags & XPU_REC_TIMED) != 0;
  // A member reports once per (comm, seq); a repeat (e.g. a re-sent batch)
  // replaces the earlier record instead of inflating the member list.
  auto same = std::find_if(e.members.begin(), e.members.end(), [&](const CollectiveMember& x) {
    return x.comm_rank == m.comm_rank && x.rank == m.rank;
  });
  // With the NCCL profiler plugin a member sends two records for one
  // occurrence: the interposer's (not timed) and the plugin's (timed), in
  // either order. A timed record is never replaced by an untimed one.
  if (same != e.members.end()) {
    if (!same->timed || m.timed) *same = m;
  } else {
    e.members.push_back(m);
  }
  if (!e.complete && e.nranks > 0 && static_cast<int32_t>(e.members.size()) >= e.nranks) {
    Complete(e);
  }
}

void CollectiveTable::Complete(CollectiveEntry& e) {
  analysis::LastArrivalFold fold;
  for (const CollectiveMember& m : e.members) {
    // Not yet: a timing record may still come.
    if (!fold.Add(m.rank, m.start_ns, m.start_ns + m.duration_ns, m.timed)) return;
  }
  e.complete = true;
  const analysis::LastArrival la = fold.Result(e.bytes, e.busbw_factor);
  if (!la.valid || e.bytes == 0) return;
  OpBandwidth& bw = completed_[e.kind];
  ++bw.count;
  bw.bus_bytes += static_cast<double>(e.bytes) * e.busbw_factor;
  bw.seconds += la.seconds;
}

const CollectiveEntry* CollectiveTable::Find(uint64_t comm_id, uint32_t seq) const {
  auto it = entries_.find(Key{comm_id, seq});
  return it == entries_.end() ? nullptr : &it->second;
}

std::map<uint16_t, OpBandwidth> CollectiveTable::TakeCompleted() {
  std::map<uint16_t, OpBandwidth> out;
  out.swap(completed_);
  return out;
}

}  // namespace xpu::engine
