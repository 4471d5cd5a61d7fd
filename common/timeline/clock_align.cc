#include "common/timeline/clock_align.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <unordered_map>

#include "xpu/formulas.h"

namespace xpu::timeline {
namespace {

int64_t MedianI64(std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  int64_t hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  int64_t lo = *std::max_element(v.begin(), v.begin() + mid);
  return lo + (hi - lo) / 2;
}

struct KeyHash {
  size_t operator()(const std::pair<uint64_t, uint32_t>& k) const {
    return static_cast<size_t>(Mix64(k.first ^ (static_cast<uint64_t>(k.second) << 1)));
  }
};

}  // namespace

int64_t ClockAlignment::OffsetFor(const std::string& host) const {
  for (const HostOffset& h : hosts) {
    if (h.host == host) return h.offset_ns;
  }
  return 0;
}

ClockAlignment EstimateClockOffsets(const std::vector<RankDump>& ranks, int32_t reference_rank) {
  ClockAlignment out;
  std::map<std::string, int> host_index;
  for (const RankDump& d : ranks) host_index.emplace(d.host, 0);
  int next = 0;
  for (auto& [h, i] : host_index) i = next++;
  std::vector<std::string> host_names(host_index.size());
  for (const auto& [h, i] : host_index) host_names[i] = h;

  const RankDump* ref = nullptr;
  for (const RankDump& d : ranks) {
    if (d.rank < 0) continue;
    if (reference_rank >= 0 ? d.rank == reference_rank : (ref == nullptr || d.rank < ref->rank))
      ref = &d;
  }
  if (ref == nullptr && !ranks.empty()) ref = &ranks.front();
  if (ref == nullptr) return out;
  out.reference_rank = ref->rank;
  out.reference_host = ref->host;

  // (comm_id, seq) -> (host index, end) of each timed member.
  std::unordered_map<std::pair<uint64_t, uint32_t>, std::vector<std::pair<int, int64_t>>, KeyHash>
      inst;
  for (const RankDump& d : ranks) {
    const int hi = host_index[d.host];
    const size_t n = d.size();
    for (size_t i = 0; i < n; ++i) {
      const xpu_record_v1 r = d.Record(i);
      if ((r.flags & XPU_REC_TIMED) == 0 || (r.flags & XPU_REC_DUR_SATURATED) != 0) continue;
      auto it = d.sigs.find(r.sig_id);
      if (it == d.sigs.end() || !IsGroupCollective(it->second.kind)) continue;
      const int64_t end = static_cast<int64_t>(r.start_ns + xpu_record_duration_ns(&r));
      inst[{it->second.comm_id, r.seq}].emplace_back(hi, end);
    }
  }

  // Pairwise samples: each instance contributes end_h - end_first for every
  // other host h in it (per host the median end of its members).
  const size_t H = host_names.size();
  std::map<std::pair<int, int>, std::vector<int64_t>> samples;  // (a, b) with a < b: end_b - end_a
  std::vector<std::vector<int64_t>> per_host(H);
  for (auto& [key, members] : inst) {
    std::vector<int> present;
    for (auto& [h, end] : members) {
      if (per_host[h].empty()) present.push_back(h);
      per_host[h].push_back(end);
    }
    if (present.size() >= 2) {
      ++out.instances;
      std::sort(present.begin(), present.end());
      const int a = present[0];
      const int64_t ea = MedianI64(per_host[a]);
      for (size_t j = 1; j < present.size(); ++j) {
        const int b = present[j];
        samples[{a, b}].push_back(MedianI64(per_host[b]) - ea);
      }
    }
    for (int h : present) per_host[h].clear();
  }

  struct Edge {
    int to;
    int64_t delta;  // offset_to - offset_from
    uint64_t n;
    double mad;
  };
  std::vector<std::vector<Edge>> adj(H);
  for (auto& [ab, v] : samples) {
    const int64_t med = MedianI64(v);
    std::vector<int64_t> dev;
    dev.reserve(v.size());
    for (int64_t x : v) dev.push_back(std::llabs(x - med));
    const double mad = static_cast<double>(MedianI64(dev));
    adj[ab.first].push_back({ab.second, med, v.size(), mad});
    adj[ab.second].push_back({ab.first, -med, v.size(), mad});
  }

  // Prim: maximum spanning tree by shared instances, from the reference host.
  std::vector<HostOffset> res(H);
  for (size_t i = 0; i < H; ++i) res[i].host = host_names[i];
  const int root = host_index[ref->host];
  res[root].aligned = true;
  using QItem = std::tuple<uint64_t, int, int, int64_t, double>;  // n, to, from, delta, mad
  std::priority_queue<QItem> pq;
  auto push_edges = [&](int from) {
    for (const Edge& e : adj[from]) {
      if (!res[e.to].aligned) pq.emplace(e.n, e.to, from, e.delta, e.mad);
    }
  };
  push_edges(root);
  while (!pq.empty()) {
    auto [n, to, from, delta, mad] = pq.top();
    pq.pop();
    if (res[to].aligned) continue;
    res[to].aligned = true;
    res[to].offset_ns = res[from].offset_ns + delta;
    res[to].samples = n;
    res[to].spread_ns = mad;
    res[to].via = host_names[from];
    push_edges(to);
  }
  out.hosts = std::move(res);
  return out;
}

}  // namespace xpu::timeline
