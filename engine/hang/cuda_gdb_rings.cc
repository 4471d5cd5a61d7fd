// engine/hang/cuda_gdb_rings.cc — see cuda_gdb_rings.h.
#include "engine/hang/cuda_gdb_rings.h"

#include <set>

namespace xpu::engine::hang {

std::vector<KernelProgress> RingProgressFromCudaGdb(
    const std::map<int32_t, std::vector<RingReading>>& by_rank, const std::string& source,
    std::map<int32_t, std::vector<KernelProgress>>* out_by_rank) {
  std::vector<KernelProgress> all;
  // channel -> rank -> reading
  std::map<int, std::map<int32_t, const RingReading*>> channels;
  for (const auto& [rank, list] : by_rank) {
    for (const RingReading& c : list) {
      if (c.channel >= 0 && c.ring_prev >= 0 && c.ring_next >= 0) channels[c.channel][rank] = &c;
    }
  }
  for (const auto& [channel, ranks] : channels) {
    // Successor of every member: read ranks name theirs; a member that was
    // not read is the ring_prev of the read rank after it.
    std::map<int32_t, int32_t> next;
    for (const auto& [rank, c] : ranks) {
      next[rank] = c->ring_next;
      if (!ranks.count(c->ring_prev)) next.emplace(c->ring_prev, rank);
    }
    // Order from the lowest read rank; the ring is whole when it closes.
    std::vector<int32_t> order;
    std::set<int32_t> seen;
    int32_t r = ranks.begin()->first;
    while (!seen.count(r)) {
      order.push_back(r);
      seen.insert(r);
      auto it = next.find(r);
      if (it == next.end()) break;
      r = it->second;
    }
    const bool closed =
        r == ranks.begin()->first && seen.size() == order.size() && next.count(order.back());
    std::map<int32_t, int32_t> pos_of;
    if (closed) {
      for (size_t i = 0; i < order.size(); ++i) pos_of[order[i]] = static_cast<int32_t>(i);
    }
    for (const auto& [rank, c] : ranks) {
      KernelProgress k;
      k.channel = "cuda-gdb ch" + std::to_string(channel);
      k.ring_pos = closed ? pos_of[rank] : -1;
      k.ring_size = closed ? static_cast<int32_t>(order.size()) : 0;
      k.prev_rank = c->ring_prev;
      k.seq = 1;  // inside the kernel
      k.completed_seq = 0;
      k.step = c->steps;
      k.sent = c->sent;
      k.next_rank = c->ring_next;
      k.source = source;
      all.push_back(k);
      if (out_by_rank != nullptr) (*out_by_rank)[rank].push_back(k);
    }
  }
  return all;
}

}  // namespace xpu::engine::hang
