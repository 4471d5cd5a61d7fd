#include "common/analysis/collective.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace xpu::analysis {

std::vector<CollInstance> GroupCollectives(const std::vector<RankTrace>& ranks, uint64_t from_ns,
                                           uint64_t to_ns) {
  std::vector<int32_t> ids;
  for (const RankTrace& t : ranks) ids.push_back(t.rank);
  std::sort(ids.begin(), ids.end());
  const bool unique_ranks = std::adjacent_find(ids.begin(), ids.end()) == ids.end();
  std::map<std::pair<uint64_t, uint32_t>, CollInstance> by_key;
  for (const RankTrace& t : ranks) {
    for (const Op& op : t.ops) {
      if (!xpu_op_is_collective(op.kind) || op.kind == XPU_OP_SEND || op.kind == XPU_OP_RECV)
        continue;
      const OpSig* s = t.Sig(op.sig_id);
      if (s == nullptr || s->comm_id == 0) continue;
      CollInstance& c = by_key[{s->comm_id, op.seq}];
      if (c.members.empty()) {
        c.comm_id = s->comm_id;
        c.seq = op.seq;
        c.kind = s->kind;
        c.nranks = s->comm_nranks;
        c.bytes = s->bytes;
        c.factor = s->busbw_factor;
      }
      // One member per rank: with the NCCL profiler plugin a rank has the
      // interposer's untimed record and the plugin's timed one (same seq).
      // A rank's ops are added together (one RankTrace after the other), so
      // with distinct ranks its member, if any, is the last one: no scan of
      // the member list, which would make a collective of N ranks cost N^2.
      CollMember m{t.rank, op.start_ns, op.end_ns(), op.timed()};
      CollMember* same = nullptr;
      if (!c.members.empty() && c.members.back().rank == t.rank) {
        same = &c.members.back();
      } else if (!unique_ranks) {
        for (CollMember& x : c.members) {
          if (x.rank == t.rank) {
            same = &x;
            break;
          }
        }
      }
      if (same == nullptr) {
        c.members.push_back(m);
      } else if (!same->timed || m.timed) {
        *same = m;
      }
    }
  }
  std::vector<CollInstance> out;
  for (auto& [key, c] : by_key) {
    uint64_t first = UINT64_MAX;
    for (const CollMember& m : c.members) first = std::min(first, m.start_ns);
    if (first >= from_ns && first < to_ns) out.push_back(std::move(c));
  }
  return out;
}

bool LastArrivalFold::Add(int32_t rank, uint64_t start_ns, uint64_t end_ns, bool timed) {
  if (!timed) untimed_ = true;
  if (untimed_) return false;
  any_ = true;
  if (start_ns >= acc_.last_start_ns) {
    acc_.last_start_ns = start_ns;
    acc_.last_rank = rank;
  }
  acc_.end_ns = std::max(acc_.end_ns, end_ns);
  return true;
}

LastArrival LastArrivalFold::Result(uint64_t bytes, double factor) const {
  if (!any_ || untimed_) return LastArrival{};
  LastArrival r = acc_;
  if (r.end_ns <= r.last_start_ns) return r;
  r.seconds = static_cast<double>(r.end_ns - r.last_start_ns) * 1e-9;
  r.algbw = static_cast<double>(bytes) / r.seconds;
  r.busbw = r.algbw * factor;
  r.valid = true;
  return r;
}

LastArrival MeasureLastArrival(const CollInstance& c) {
  if (c.members.empty() || (c.nranks > 0 && static_cast<int32_t>(c.members.size()) < c.nranks)) {
    return LastArrival{};
  }
  LastArrivalFold fold;
  for (const CollMember& m : c.members) {
    if (!fold.Add(m.rank, m.start_ns, m.end_ns, m.timed)) return LastArrival{};
  }
  return fold.Result(c.bytes, c.factor);
}

std::string CommBandwidth::ClassKey() const { return absl::StrCat(kind, "/", bytes, "/", nranks); }

std::vector<CommBandwidth> CommunicatorBandwidth(const std::vector<RankTrace>& ranks,
                                                 uint64_t from_ns, uint64_t to_ns) {
  std::map<int32_t, std::string> host_of;
  for (const RankTrace& t : ranks) host_of[t.rank] = t.host;
  // (comm, kind, bytes) so that one communicator's ops of different sizes
  // are compared with like only. Member ranks are collected as a list and
  // made a set once at the end: a set insert per member and instance would
  // dominate the cost for communicators of many ranks.
  struct Acc {
    CommBandwidth b;
    std::vector<int32_t> ranks;
  };
  std::map<std::tuple<uint64_t, uint16_t, uint64_t>, Acc> acc;
  for (const CollInstance& c : GroupCollectives(ranks, from_ns, to_ns)) {
    LastArrival la = MeasureLastArrival(c);
    if (!la.valid) continue;
    Acc& a = acc[{c.comm_id, c.kind, c.bytes}];
    CommBandwidth& b = a.b;
    b.comm_id = c.comm_id;
    b.kind = c.kind;
    b.nranks = c.nranks;
    b.bytes = c.bytes;
    for (const CollMember& m : c.members) a.ranks.push_back(m.rank);
    if (a.ranks.size() > 4 * static_cast<size_t>(std::max(c.nranks, 1))) {
      std::sort(a.ranks.begin(), a.ranks.end());
      a.ranks.erase(std::unique(a.ranks.begin(), a.ranks.end()), a.ranks.end());
    }
    ++b.count;
    b.bus_bytes += static_cast<double>(c.bytes) * c.factor;
    b.seconds += la.seconds;
  }
  std::vector<CommBandwidth> out;
  for (auto& [k, a] : acc) {
    std::sort(a.ranks.begin(), a.ranks.end());
    a.ranks.erase(std::unique(a.ranks.begin(), a.ranks.end()), a.ranks.end());
    a.b.ranks.insert(a.ranks.begin(), a.ranks.end());
    for (int32_t r : a.ranks) a.b.hosts.insert(host_of[r]);
    out.push_back(std::move(a.b));
  }
  return out;
}

std::vector<LinkBandwidth> P2pLinks(const std::vector<RankTrace>& ranks, uint64_t from_ns,
                                    uint64_t to_ns) {
  // comm rank -> global rank per communicator, from every member's signatures.
  std::map<std::pair<uint64_t, int32_t>, int32_t> global;
  std::map<int32_t, std::string> host_of;
  for (const RankTrace& t : ranks) {
    host_of[t.rank] = t.host;
    for (const auto& [id, s] : t.sigs) {
      if (s.collective() && s.comm_id != 0 && s.comm_rank >= 0)
        global[{s.comm_id, s.comm_rank}] = t.rank;
    }
  }
  // (src, dst) -> sender's sends and receiver's recvs, in start order.
  struct Sides {
    std::vector<const Op*> send, recv;
    uint64_t bytes = 0;
  };
  std::map<std::pair<int32_t, int32_t>, Sides> links;
  for (const RankTrace& t : ranks) {
    for (const Op& op : t.ops) {
      if (op.kind != XPU_OP_SEND && op.kind != XPU_OP_RECV) continue;
      if (op.start_ns < from_ns || op.start_ns >= to_ns || !op.timed()) continue;
      const OpSig* s = t.Sig(op.sig_id);
      if (s == nullptr || s->peer < 0) continue;
      auto g = global.find({s->comm_id, s->peer});
      if (g == global.end()) continue;
      if (op.kind == XPU_OP_SEND) {
        Sides& l = links[{t.rank, g->second}];
        l.send.push_back(&op);
        l.bytes = s->bytes;
      } else {
        links[{g->second, t.rank}].recv.push_back(&op);
      }
    }
  }
  std::vector<LinkBandwidth> out;
  for (auto& [key, l] : links) {
    if (l.send.empty()) continue;
    LinkBandwidth b;
    b.src = key.first;
    b.dst = key.second;
    b.src_host = host_of[b.src];
    b.dst_host = host_of[b.dst];
    // Align the newest ends: a window boundary may cut either side's oldest.
    const size_t n = l.recv.empty() ? l.send.size() : std::min(l.send.size(), l.recv.size());
    for (size_t i = 0; i < n; ++i) {
      const Op* s = l.send[l.send.size() - n + i];
      uint64_t start = s->start_ns, end = s->end_ns();
      if (!l.recv.empty()) {
        const Op* r = l.recv[l.recv.size() - n + i];
        start = std::max(start, r->start_ns);
        end = std::max(end, r->end_ns());
      }
      if (end <= start) continue;
      ++b.count;
      b.bytes += static_cast<double>(l.bytes);
      b.seconds += static_cast<double>(end - start) * 1e-9;
    }
    if (b.count > 0) out.push_back(std::move(b));
  }
  return out;
}

}  // namespace xpu::analysis
