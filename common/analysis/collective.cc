#include "common/analysis/collective.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace xpu::analysis {
namespace {

// The signature of a collective grouped by (communicator, seq): not a
// send/recv, with a communicator; nullptr for any other op.
const OpSig* GroupedSig(const RankTrace& t, const Op& op) {
  if (!xpu_op_is_collective(op.kind) || op.kind == XPU_OP_SEND || op.kind == XPU_OP_RECV)
    return nullptr;
  const OpSig* s = t.Sig(op.sig_id);
  return s == nullptr || s->comm_id == 0 ? nullptr : s;
}

bool UniqueRanks(const std::vector<RankTrace>& ranks) {
  std::vector<int32_t> ids;
  for (const RankTrace& t : ranks) ids.push_back(t.rank);
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) == ids.end();
}

}  // namespace

std::vector<CollInstance> GroupCollectives(const std::vector<RankTrace>& ranks, uint64_t from_ns,
                                           uint64_t to_ns) {
  const bool unique_ranks = UniqueRanks(ranks);
  std::map<std::pair<uint64_t, uint32_t>, CollInstance> by_key;
  for (const RankTrace& t : ranks) {
    for (const Op& op : t.ops) {
      const OpSig* s = GroupedSig(t, op);
      if (s == nullptr) continue;
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

namespace {

// The figures of one (communicator, op kind, size) being summed.
struct CommAcc {
  CommBandwidth b;
  std::vector<int32_t> ranks;                        // members, deduplicated now and then
  std::vector<std::pair<uint32_t, double>> seconds;  // (seq, seconds) of each measured instance
  // After members were appended to `ranks`.
  void Dedup(int32_t nranks) {
    // Made a set once at the end: a set insert per member and instance would
    // dominate the cost for communicators of many ranks.
    if (ranks.size() > 4 * static_cast<size_t>(std::max(nranks, 1))) {
      std::sort(ranks.begin(), ranks.end());
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    }
  }
  void AddMeasured(uint32_t seq, uint64_t bytes, double factor, double s) {
    ++b.count;
    b.bus_bytes += static_cast<double>(bytes) * factor;
    seconds.emplace_back(seq, s);
  }
};
using CommAccs = std::map<std::tuple<uint64_t, uint16_t, uint64_t>, CommAcc>;

CommAcc& AccOf(CommAccs* accs, uint64_t comm_id, uint16_t kind, int32_t nranks, uint64_t bytes) {
  CommAcc& a = (*accs)[{comm_id, kind, bytes}];
  a.b.comm_id = comm_id;
  a.b.kind = kind;
  a.b.nranks = nranks;
  a.b.bytes = bytes;
  return a;
}

std::vector<CommBandwidth> Finish(CommAccs* accs, const std::vector<RankTrace>& ranks) {
  std::map<int32_t, std::string> host_of;
  for (const RankTrace& t : ranks) host_of[t.rank] = t.host;
  std::vector<CommBandwidth> out;
  for (auto& [k, a] : *accs) {
    if (a.b.count == 0) continue;  // no instance measured
    // Summed in instance order, whatever order they were measured in.
    std::sort(a.seconds.begin(), a.seconds.end());
    for (const auto& [seq, s] : a.seconds) a.b.seconds += s;
    std::sort(a.ranks.begin(), a.ranks.end());
    a.ranks.erase(std::unique(a.ranks.begin(), a.ranks.end()), a.ranks.end());
    a.b.ranks.insert(a.ranks.begin(), a.ranks.end());
    for (int32_t r : a.ranks) a.b.hosts.insert(host_of[r]);
    out.push_back(std::move(a.b));
  }
  return out;
}

// From every instance grouped with its members (GroupCollectives): for
// traces that repeat a rank.
std::vector<CommBandwidth> BandwidthOfGrouped(const std::vector<RankTrace>& ranks, uint64_t from_ns,
                                              uint64_t to_ns) {
  CommAccs accs;
  for (const CollInstance& c : GroupCollectives(ranks, from_ns, to_ns)) {
    LastArrival la = MeasureLastArrival(c);
    if (!la.valid) continue;
    CommAcc& a = AccOf(&accs, c.comm_id, c.kind, c.nranks, c.bytes);
    for (const CollMember& m : c.members) a.ranks.push_back(m.rank);
    a.Dedup(c.nranks);
    a.AddMeasured(c.seq, c.bytes, c.factor, la.seconds);
  }
  return Finish(&accs, ranks);
}

// Increasing ranks as arithmetic runs: the members of an instance are read
// in rank order, so a tensor-parallel group is one run, a data-parallel
// group (a stride apart) one, the world one.
class RankRuns {
 public:
  void Add(int32_t r) {
    if (!runs_.empty()) {
      Run& b = runs_.back();
      if (b.count == 1 && r > b.first) {
        b.stride = static_cast<int64_t>(r) - b.first;
        b.count = 2;
        return;
      }
      if (b.count > 1 && static_cast<int64_t>(r) == b.first + b.stride * b.count) {
        ++b.count;
        return;
      }
    }
    runs_.push_back({r, 0, 1});
  }
  void AppendTo(std::vector<int32_t>* out) const {
    for (const Run& b : runs_) {
      for (int64_t i = 0; i < b.count; ++i)
        out->push_back(static_cast<int32_t>(b.first + b.stride * i));
    }
  }

 private:
  struct Run {
    int32_t first;
    int64_t stride;
    int64_t count;
  };
  std::vector<Run> runs_;
};

// One collective instance while the ranks are read one after another: the
// last-arrival fold of its members so far, not the members.
struct OpenInstance {
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
  double factor = 0;
  int32_t members = 0;             // folded in
  uint64_t first_ns = UINT64_MAX;  // their earliest start
  LastArrivalFold fold;
  CollMember pending;  // the member of the rank being read (rank -1: none)
  RankRuns ranks;      // of those folded in
};

}  // namespace

std::vector<CommBandwidth> CommunicatorBandwidth(const std::vector<RankTrace>& ranks,
                                                 uint64_t from_ns, uint64_t to_ns) {
  if (!UniqueRanks(ranks)) return BandwidthOfGrouped(ranks, from_ns, to_ns);
  // Each instance is folded as its members' ranks are read (a rank's member
  // is its timed record when it has the plugin's and the interposer's) and
  // measured once it has every member, when the reading moves past the rank
  // that completed it: only the instances still open are held (those of
  // communicators whose members are yet to be read), not every instance of
  // the window with its members (a quarter of the engine's memory in a
  // 100k-rank `tp8pp4` tick's peak was that grouping). The figures are
  // those of measuring the grouped instances (BandwidthOfGrouped).
  using Key = std::pair<uint64_t, uint32_t>;  // (comm_id, seq)
  std::map<Key, OpenInstance> open;
  CommAccs accs;
  auto close = [&](const Key& key, OpenInstance& c) {
    if (c.first_ns < from_ns || c.first_ns >= to_ns) return;
    if (c.members == 0 || (c.nranks > 0 && c.members < c.nranks)) return;
    const LastArrival la = c.fold.Result(c.bytes, c.factor);
    if (!la.valid) return;
    CommAcc& a = AccOf(&accs, key.first, c.kind, c.nranks, c.bytes);
    c.ranks.AppendTo(&a.ranks);
    a.Dedup(c.nranks);
    a.AddMeasured(key.second, c.bytes, c.factor, la.seconds);
  };
  std::vector<Key> touched;  // instances the rank being read has a member in
  auto settle = [&] {
    for (const Key& key : touched) {
      auto it = open.find(key);
      OpenInstance& c = it->second;
      c.fold.Add(c.pending.rank, c.pending.start_ns, c.pending.end_ns, c.pending.timed);
      c.first_ns = std::min(c.first_ns, c.pending.start_ns);
      c.ranks.Add(c.pending.rank);
      ++c.members;
      c.pending.rank = -1;
      if (c.nranks > 0 && c.members >= c.nranks) {
        close(key, c);
        open.erase(it);
      }
    }
    touched.clear();
  };
  for (const RankTrace& t : ranks) {
    for (const Op& op : t.ops) {
      const OpSig* s = GroupedSig(t, op);
      if (s == nullptr) continue;
      const Key key{s->comm_id, op.seq};
      auto [it, fresh] = open.try_emplace(key);
      OpenInstance& c = it->second;
      if (fresh) {
        c.kind = s->kind;
        c.nranks = s->comm_nranks;
        c.bytes = s->bytes;
        c.factor = s->busbw_factor;
      }
      const CollMember m{t.rank, op.start_ns, op.end_ns(), op.timed()};
      if (c.pending.rank != t.rank) {
        c.pending = m;
        touched.push_back(key);
      } else if (!c.pending.timed || m.timed) {
        c.pending = m;  // one member per rank, its timed record if any
      }
    }
    settle();
  }
  for (auto& [key, c] : open) close(key, c);
  return Finish(&accs, ranks);
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
