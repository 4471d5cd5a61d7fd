// engine/hang/classify.cc — see classify.h.
#include "engine/hang/classify.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "engine/hang/stall_site.h"
#include "engine/hang/step_pattern.h"
#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

bool Dead(const RankEvidence& r) {
  return r.exited || r.proc_state == "gone" || r.proc_state == "zombie" || r.proc_state == "dead";
}

bool InCommunication(const RankEvidence& r) {
  for (const auto* threads : {&r.native, &r.python}) {
    for (const ThreadStack& t : *threads) {
      for (const std::string& f : t.frames) {
        if (IsCommunicationFrame(f)) return true;
      }
    }
  }
  return false;
}

bool HasPending(const RankEvidence& r) {
  for (const CommState& c : r.comms) {
    if (c.pending_seq != 0) return true;
  }
  return false;
}

// Waiting in a collective: an outstanding collective, or (without a progress
// table) a communication frame on its stacks.
bool Waiting(const RankEvidence& r) {
  return HasPending(r) || (!r.has_progress && InCommunication(r));
}

// Where a culprit sits: the innermost frames of its main thread (Python
// first when there are Python stacks).
std::string WhereIs(const RankEvidence& r) {
  const ThreadStack* t = MainThread(!r.python.empty() ? r.python : r.native);
  return t != nullptr ? Innermost(*t, 4) : "no stacks";
}

// Rank sets are sorted vectors (Sorted), looked up by binary search: a
// verdict over 100k ranks stays linear-logarithmic.
std::vector<int32_t> Sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

bool Contains(const std::vector<int32_t>& sorted_set, int32_t rank) {
  return std::binary_search(sorted_set.begin(), sorted_set.end(), rank);
}

void SetCulprits(const std::vector<RankEvidence>& all, const std::vector<int32_t>& culprits,
                 Verdict* v) {
  v->culprits = Sorted(culprits);
  std::set<std::string> hosts;
  for (const RankEvidence& r : all) {
    if (Contains(v->culprits, r.rank)) hosts.insert(r.host);
  }
  v->hosts.assign(hosts.begin(), hosts.end());
}

// Rank lists in reasons and detail lines: the first kListedRuns runs
// ("0-3068,3072-7304,..."), then how many ranks were left out; the
// verdict's culprits stay complete.
constexpr size_t kListedRuns = 64;

std::string Ranks(const std::vector<int32_t>& r) {
  const std::string all = CompressRanks(r);
  size_t cut = 0;
  for (size_t runs = 0; runs < kListedRuns; ++runs) {
    cut = all.find(',', cut + (runs > 0 ? 1 : 0));
    if (cut == std::string::npos) return all;
  }
  std::vector<int32_t> s = Sorted(r);
  s.erase(std::unique(s.begin(), s.end()), s.end());
  const std::string listed = all.substr(0, cut);
  // Ranks within the listed runs: up to the last listed one.
  const size_t dash = listed.find_last_of(",-");
  const int32_t last = std::stoi(listed.substr(dash == std::string::npos ? 0 : dash + 1));
  const size_t left = static_cast<size_t>(s.end() - std::upper_bound(s.begin(), s.end(), last));
  return listed + ",... (" + std::to_string(s.size()) + " ranks; " + std::to_string(left) +
         " not listed)";
}

// The collective a communicator is stuck on: the smallest outstanding seq.
struct CommView {
  uint32_t stuck_seq = 0;
  std::map<int32_t, const CommState*> by_rank;  // members that reported the comm
};

std::map<uint64_t, CommView> Communicators(const std::vector<RankEvidence>& ranks) {
  std::map<uint64_t, CommView> out;
  for (const RankEvidence& r : ranks) {
    for (const CommState& c : r.comms) {
      CommView& v = out[c.comm_id];
      v.by_rank[r.rank] = &c;
      if (c.pending_seq != 0 && (v.stuck_seq == 0 || c.pending_seq < v.stuck_seq))
        v.stuck_seq = c.pending_seq;
    }
  }
  return out;
}

std::string OpName(uint32_t kind) {
  switch (kind) {
    case XPU_OP_ALLREDUCE:
      return "allreduce";
    case XPU_OP_ALLGATHER:
      return "allgather";
    case XPU_OP_REDUCESCATTER:
      return "reducescatter";
    case XPU_OP_BROADCAST:
      return "broadcast";
    case XPU_OP_REDUCE:
      return "reduce";
    case XPU_OP_ALLTOALL:
      return "alltoall";
    case XPU_OP_GATHER:
      return "gather";
    case XPU_OP_SCATTER:
      return "scatter";
    case XPU_OP_SEND:
      return "send";
    case XPU_OP_RECV:
      return "recv";
    case XPU_OP_PY_CHECKPOINT:
      return "checkpoint";
    case XPU_OP_PY_DATALOADER:
      return "dataloader";
    case XPU_OP_PY_GC:
      return "gc";
    default:
      return "op" + std::to_string(kind);
  }
}

}  // namespace

const char* HangClassName(HangClass c) {
  switch (c) {
    case HangClass::kNone:
      return "none";
    case HangClass::kCommunication:
      return "communication";
    case HangClass::kNonCommunication:
      return "non-communication";
    case HangClass::kMismatch:
      return "mismatch";
    case HangClass::kCrash:
      return "crash";
    case HangClass::kBusyWait:
      return "busy-wait";
  }
  return "none";
}

int FindStalledLink(const std::vector<uint64_t>& p) {
  const int n = static_cast<int>(p.size());
  if (n < 2) return -1;
  int best = -1;
  uint64_t best_drop = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t prev = p[static_cast<size_t>((i - 1 + n) % n)];
    if (prev > p[static_cast<size_t>(i)] && prev - p[static_cast<size_t>(i)] > best_drop) {
      best_drop = prev - p[static_cast<size_t>(i)];
      best = i;
    }
  }
  return best;
}

RingFinding LocateOnRings(const std::vector<RankEvidence>& ranks) {
  struct Entry {
    int32_t rank = -1, prev = -1, next = -1, pos = -1, size = 0;
    uint64_t step = 0, sent = 0;
  };
  std::map<std::string, std::vector<Entry>> rings;
  for (const RankEvidence& r : ranks) {
    for (const KernelProgress& k : r.kernel) {
      if (k.completed_seq >= k.seq) continue;  // not inside a kernel
      rings[k.channel].push_back(
          {r.rank, k.prev_rank, k.next_rank, k.ring_pos, k.ring_size, k.step, k.sent});
    }
  }
  RingFinding f;
  // (named rank, other end or -1 when the named rank was not read) -> channels
  std::map<std::pair<int32_t, int32_t>, int> votes;
  std::map<std::pair<int32_t, int32_t>, std::set<std::string>> links;
  for (auto& [channel, es] : rings) {
    // Neighbours by position where the source gives positions only.
    std::map<int32_t, int32_t> rank_at;
    for (const Entry& e : es) rank_at[e.pos] = e.rank;
    for (Entry& e : es) {
      if (e.pos < 0 || e.size <= 1) continue;
      auto prev = rank_at.find((e.pos - 1 + e.size) % e.size),
           next = rank_at.find((e.pos + 1) % e.size);
      if (e.prev < 0 && prev != rank_at.end()) e.prev = prev->second;
      if (e.next < 0 && next != rank_at.end()) e.next = next->second;
    }
    if (es.size() < 2) continue;
    ++f.channels;
    std::map<int32_t, const Entry*> of;
    for (const Entry& e : es) of[e.rank] = &e;
    std::string line = "ring " + channel.substr(0, 16) + " steps received/sent in the kernel:";
    std::set<int32_t> unread;
    for (const Entry& e : es) {
      line += " " + std::to_string(e.rank) + "=" + std::to_string(e.step) + "/" +
              std::to_string(e.sent);
      for (int32_t n : {e.prev, e.next}) {
        if (n >= 0 && !of.count(n)) unread.insert(n);
      }
    }
    if (!unread.empty()) line += " (not read: " + Ranks({unread.begin(), unread.end()}) + ")";
    if (f.lines.size() < 4) f.lines.push_back(line);
    // Receive side: the rank that received least sits behind the stall;
    // among equals, one whose predecessor was not read, else the largest
    // drop. Send side, when receiving is uniform (e.g. flags not readable
    // for the protocol): the rank whose successor consumed least sits
    // before it.
    auto pick = [&](uint64_t Entry::*metric, int32_t Entry::*other) -> const Entry* {
      uint64_t lo = es[0].*metric, hi = es[0].*metric;
      for (const Entry& e : es) {
        lo = std::min(lo, e.*metric);
        hi = std::max(hi, e.*metric);
      }
      if (lo == hi) return nullptr;  // uniform: no link stands out
      const Entry* best = nullptr;
      for (const Entry& e : es) {
        if (e.*metric != lo || e.*other < 0) continue;
        if (best == nullptr) {
          best = &e;
          continue;
        }
        const bool ue = !of.count(e.*other), ub = !of.count(best->*other);
        if (ue != ub ? ue : (!ue && of[e.*other]->*metric > of[best->*other]->*metric)) best = &e;
      }
      return best;
    };
    int32_t from = -1, to = -1;
    if (const Entry* e = pick(&Entry::step, &Entry::prev)) {
      from = e->prev;
      to = e->rank;
    } else if (const Entry* s = pick(&Entry::sent, &Entry::next)) {
      from = s->rank;
      to = s->next;
    } else {
      continue;
    }
    // An end that was not read is named alone, whichever neighbour noticed
    // (rings differ per channel); else the link.
    std::pair<int32_t, int32_t> key{from, to};
    if (!of.count(from)) {
      key = {from, -1};
    } else if (!of.count(to)) {
      key = {to, -1};
    }
    ++votes[key];
    links[key].insert(std::to_string(from) + "->" + std::to_string(to));
  }
  int top = 0;
  std::pair<int32_t, int32_t> winner{-1, -1};
  for (const auto& [key, n] : votes) {
    if (n > top) {
      top = n;
      winner = key;
    }
  }
  if (top > 0) {
    const std::set<std::string>& l = links[winner];
    f.link = *l.begin();
    for (const std::string& x : l) f.links += (f.links.empty() ? "" : ", ") + x;
    f.agree = top;
    f.from_read = winner.second >= 0;
    f.from = winner.first;
    f.to = f.from_read ? winner.second : -1;
  }
  return f;
}

namespace {

// Ring progress as evidence for a verdict reached from process state or
// sequence numbers: the details, the link, and whether it names `culprits`.
void CorroborateFromRings(const std::vector<RankEvidence>& ranks,
                          const std::vector<int32_t>& culprits, Verdict* v) {
  const RingFinding f = LocateOnRings(ranks);
  if (f.channels == 0) return;
  for (const std::string& l : f.lines) v->details.push_back(l);
  if (f.link.empty()) {
    v->details.push_back("intra-kernel ring progress is uniform on " + std::to_string(f.channels) +
                         " channel(s): no link stands out");
    return;
  }
  v->faulty_link = f.link;
  v->ring_named = f.from_read ? std::vector<int32_t>{f.from, f.to} : std::vector<int32_t>{f.from};
  const bool agrees = std::find(culprits.begin(), culprits.end(), f.from) != culprits.end();
  v->details.push_back(
      "intra-kernel ring progress stops at " +
      (f.from_read ? "link " + f.link : "rank " + std::to_string(f.from) + " (not in the kernel)") +
      " on " + std::to_string(f.agree) + " of " + std::to_string(f.channels) +
      " channel(s): link(s) " + f.links);
  v->reason += agrees ? "; the other ranks' intra-kernel ring progress stops at rank " +
                            std::to_string(f.from) + " too (" + std::to_string(f.agree) + "/" +
                            std::to_string(f.channels) + " channels, link(s) " + f.links + ")"
                      : "; intra-kernel ring progress stops at link(s) " + f.links + " instead";
}

}  // namespace

namespace {

// The ranks by process state, the first thing a verdict looks at.
struct RankStates {
  std::vector<int32_t> waiting, dead, stopped, dstate, idle;
};

RankStates StatesOf(const std::vector<RankEvidence>& ranks) {
  RankStates s;
  for (const RankEvidence& r : ranks) {
    if (Dead(r)) {
      s.dead.push_back(r.rank);
    } else if (r.proc_state == "stopped" || r.proc_state == "tracing-stop") {
      s.stopped.push_back(r.rank);
    } else if (r.proc_state == "disk-sleep") {
      s.dstate.push_back(r.rank);
    } else if (Waiting(r)) {
      s.waiting.push_back(r.rank);
    } else {
      s.idle.push_back(r.rank);
    }
  }
  for (auto* v : {&s.waiting, &s.dead, &s.stopped, &s.dstate, &s.idle}) *v = Sorted(std::move(*v));
  return s;
}

// One detail line per rank of `set` (sorted), the first kDescribed of them:
// host, pid, process state and where it is.
constexpr size_t kDescribed = 32;

void DescribeRanks(const std::vector<RankEvidence>& ranks, const std::vector<int32_t>& set,
                   Verdict* v) {
  size_t n = 0;
  for (const RankEvidence& r : ranks) {
    if (!Contains(set, r.rank)) continue;
    if (++n > kDescribed) continue;
    v->details.push_back("rank " + std::to_string(r.rank) + " (" + r.host + " pid " +
                         std::to_string(r.pid) + "): " + r.proc_state + ", at " + WhereIs(r));
  }
  if (n > kDescribed) {
    v->details.push_back("(" + std::to_string(n - kDescribed) + " more rank(s) not described: " +
                         std::to_string(kDescribed) + " are)");
  }
}

// Each step below decides the verdict when its pattern is present (and
// returns true), else leaves `v` as it was. Classify tries them in order.

// 1. Crash: a rank exited or died while others wait for it.
bool ClassifyCrash(const std::vector<RankEvidence>& ranks, const RankStates& s, Verdict* v) {
  if (s.dead.empty()) return false;
  v->cls = HangClass::kCrash;
  v->team = "operations";
  SetCulprits(ranks, s.dead, v);
  v->reason = "rank(s) " + Ranks(s.dead) + " exited or died while " +
              (!s.waiting.empty() ? "rank(s) " + Ranks(s.waiting) + " wait in a collective"
                                  : std::string("the others make no progress"));
  DescribeRanks(ranks, s.dead, v);
  return true;
}

// 2. A rank stopped (job control) or in uninterruptible sleep (I/O, driver).
bool ClassifyStopped(const std::vector<RankEvidence>& ranks, const RankStates& s, Verdict* v) {
  if (s.stopped.empty() && s.dstate.empty()) return false;
  std::vector<int32_t> bad = s.stopped;
  bad.insert(bad.end(), s.dstate.begin(), s.dstate.end());
  bad = Sorted(std::move(bad));
  v->cls = HangClass::kNonCommunication;
  v->team = "operations";
  SetCulprits(ranks, bad, v);
  v->reason =
      (!s.stopped.empty() ? "rank(s) " + Ranks(s.stopped) + " stopped (SIGSTOP / job control)"
                          : "") +
      std::string(!s.stopped.empty() && !s.dstate.empty() ? "; " : "") +
      (!s.dstate.empty()
           ? "rank(s) " + Ranks(s.dstate) + " in uninterruptible sleep (D: I/O, driver)"
           : "") +
      (!s.waiting.empty() ? "; the others wait in a collective" : "; no rank makes progress");
  DescribeRanks(ranks, bad, v);
  CorroborateFromRings(ranks, bad, v);
  return true;
}

// 3. Busy-wait: the ranks outside the collective are all inside an open host
// interval (checkpoint, data loading): not a fault.
bool ClassifyBusyWait(const std::vector<RankEvidence>& ranks, const RankStates& s, Verdict* v) {
  if (s.idle.empty() || s.waiting.empty()) return false;
  for (const RankEvidence& r : ranks) {
    if (Contains(s.idle, r.rank) && r.open.empty() && !r.progressing) return false;
  }
  v->cls = HangClass::kBusyWait;
  v->team = "";
  SetCulprits(ranks, s.idle, v);
  for (const RankEvidence& r : ranks) {
    if (!Contains(s.idle, r.rank)) continue;
    for (const OpenInterval& o : r.open) {
      v->details.push_back("rank " + std::to_string(r.rank) + " busy in " + OpName(o.kind) + " \"" +
                           o.name + "\" since " + std::to_string(o.since_ns));
    }
    if (r.open.empty() && r.progressing) {
      v->details.push_back("rank " + std::to_string(r.rank) +
                           " still completes work outside the collective (last progress " +
                           std::to_string(r.progress_age_ns / 1000000) + " ms ago)");
    }
  }
  v->reason = "rank(s) " + Ranks(s.waiting) + " wait in a collective for busy rank(s) " +
              Ranks(s.idle) +
              " (an open host interval such as a checkpoint save, or work that still makes "
              "progress such as an evaluation): not a fault";
  return true;
}

// (op, bytes) -> the members that issued it at a communicator's stuck seq.
using ShapeGroups = std::map<std::tuple<uint32_t, uint64_t>, std::vector<int32_t>>;

std::string ShapeText(const OpShape& shape) {
  return OpName(shape.first) + " of " + std::to_string(shape.second) + " bytes";
}

// The odd ones out of a mismatch, decided from what each rank issued at the
// stuck seq: against the job's own per-step pattern (the groups whose op
// differs from the expected one, when exactly one group issued it); else
// the minority shape when one shape has a clear majority; else every group,
// and the reason says they cannot be told apart. Never from how many
// collectives a rank has issued: a healthy rank may simply have enqueued
// further ahead. Adds a detail line per shape and one for the pattern.
std::vector<int32_t> MismatchedRanks(const CommView& view, const ShapeGroups& shapes,
                                     const Expectation& expected, bool* told_apart, Verdict* v) {
  for (const auto& [shape, rs] : shapes) {
    v->details.push_back("seq " + std::to_string(view.stuck_seq) + ": ranks " + Ranks(rs) +
                         " issued " + ShapeText({std::get<0>(shape), std::get<1>(shape)}));
  }
  *told_apart = true;
  std::vector<int32_t> odd;
  if (expected.known) {
    v->details.push_back("the communicator's per-step pattern (period " +
                         std::to_string(expected.period) + " collectives, learnt from the " +
                         std::to_string(expected.history) + " before) expects " +
                         ShapeText(expected.shape) + " at seq " + std::to_string(view.stuck_seq) +
                         " (" + std::to_string(expected.votes) + " of " +
                         std::to_string(expected.occurrences) + " earlier steps)");
    int matching = 0;
    for (const auto& [shape, rs] : shapes) {
      if (OpShape{std::get<0>(shape), std::get<1>(shape)} == expected.shape) {
        ++matching;
      } else {
        odd.insert(odd.end(), rs.begin(), rs.end());
      }
    }
    if (matching == 1) return odd;
    odd.clear();
    v->details.push_back(matching == 0 ? "no rank issued what the pattern expects"
                                       : "several groups issued what the pattern expects");
  } else {
    v->details.push_back("the job's per-step pattern does not tell: " + expected.why_not);
  }
  size_t majority = 0;
  for (const auto& [shape, rs] : shapes) majority = std::max(majority, rs.size());
  size_t at_majority = 0;
  for (const auto& [shape, rs] : shapes) at_majority += rs.size() == majority ? 1 : 0;
  if (at_majority == 1) {
    for (const auto& [shape, rs] : shapes) {
      if (rs.size() < majority) odd.insert(odd.end(), rs.begin(), rs.end());
    }
    v->details.push_back("the minority is named: " + Ranks(odd));
    return odd;
  }
  *told_apart = false;
  for (const auto& [shape, rs] : shapes) odd.insert(odd.end(), rs.begin(), rs.end());
  v->details.push_back(
      "the ranks cannot be told apart: neither the per-step pattern nor a majority says which "
      "issued the wrong collective");
  return odd;
}

// 4./5. Sequence analysis per communicator: at the stuck seq, members that
// issued different ops or sizes (mismatch), or members that never issued it
// while others wait in it.
bool ClassifySequences(const std::vector<RankEvidence>& ranks,
                       const std::map<uint64_t, CommView>& comms, const ClassifyContext& context,
                       Verdict* v) {
  for (const auto& [comm_id, view] : comms) {
    if (view.stuck_seq == 0) continue;
    ShapeGroups shapes;
    std::vector<int32_t> missing;
    for (const auto& [rank, c] : view.by_rank) {
      if (c->last_issued < view.stuck_seq) {
        missing.push_back(rank);
      } else if (c->pending_seq == view.stuck_seq) {
        shapes[{c->pending_kind, c->pending_bytes}].push_back(rank);
      }
    }
    if (shapes.size() > 1) {
      auto hist = context.completed.find(comm_id);
      const Expectation expected =
          hist != context.completed.end()
              ? ExpectedAt(hist->second, view.stuck_seq)
              : Expectation{false, {}, 0, 0, 0, 0, "no completed collectives known"};
      bool told_apart = true;
      const std::vector<int32_t> odd = MismatchedRanks(view, shapes, expected, &told_apart, v);
      v->cls = HangClass::kMismatch;
      v->team = "algorithm";
      v->comm_id = comm_id;
      v->stuck_seq = view.stuck_seq;
      SetCulprits(ranks, odd, v);
      v->reason = "collective mismatch at seq " + std::to_string(view.stuck_seq) +
                  " on communicator " + std::to_string(comm_id) + ": " +
                  (told_apart ? "rank(s) " + Ranks(odd) + " issued " +
                                    (expected.known ? "a different collective than the job's "
                                                      "per-step pattern expects (" +
                                                          ShapeText(expected.shape) + ")"
                                                    : std::string("a different op or size than "
                                                                  "the majority"))
                              : "ranks " + Ranks(odd) +
                                    " issued different ops or sizes and cannot be told apart");
      return true;
    }
    if (!missing.empty() && !shapes.empty()) {
      // A rank known only from a table the engine is behind on may well
      // have issued the collective since: it is not named.
      std::vector<int32_t> unread;
      for (const RankEvidence& r : ranks) {
        if (r.table_behind && Contains(missing, r.rank)) unread.push_back(r.rank);
      }
      std::sort(unread.begin(), unread.end());
      missing.erase(std::remove_if(missing.begin(), missing.end(),
                                   [&](int32_t r) { return Contains(unread, r); }),
                    missing.end());
      const std::string unread_text =
          "rank(s) " + Ranks(unread) + " had not issued collective seq " +
          std::to_string(view.stuck_seq) + " as far as the engine has read them, but their " +
          "daemons did not answer and the engine has not read all they sent";
      if (missing.empty()) {
        v->cls = HangClass::kNone;
        v->evidence_behind = true;
        v->comm_id = comm_id;
        v->stuck_seq = view.stuck_seq;
        v->reason = unread_text + ": no culprit named until it has";
        return true;
      }
      if (!unread.empty()) v->details.push_back(unread_text + ": not named");
      v->cls = HangClass::kNonCommunication;
      v->team = "algorithm";
      v->comm_id = comm_id;
      v->stuck_seq = view.stuck_seq;
      SetCulprits(ranks, missing, v);
      const auto& [shape, rs] = *shapes.begin();
      v->reason = "rank(s) " + Ranks(missing) + " never issued collective seq " +
                  std::to_string(view.stuck_seq) + " (" + OpName(std::get<0>(shape)) +
                  ") that rank(s) " + Ranks(rs) + " wait in";
      for (const RankEvidence& r : ranks) {
        if (!Contains(missing, r.rank)) continue;
        const StallSite site = WhereStalled(r, context.now_ns);
        if (site.kind != StallSite::Kind::kUnknown)
          v->reason += "; rank " + std::to_string(r.rank) + " " + site.summary;
      }
      DescribeRanks(ranks, missing, v);
      CorroborateFromRings(ranks, missing, v);
      return true;
    }
  }
  return false;
}

// Every member the engine holds waits inside the stuck collective, but the
// communicator has more members than that (processes the engine refused,
// e.g. for its job buffer, or never heard from): the hang is among those,
// and "all inside" would be wrong. Named by communicator rank (which job
// ranks they are is not known without them); non-communication as far as
// the engine can tell, for operations (the missing processes, their
// daemons, the engine's limits).
bool AbsentMembers(const std::vector<RankEvidence>& ranks, uint64_t comm_id,
                   const CommView& view, Verdict* v) {
  int32_t nranks = 0;
  std::vector<int32_t> held;
  for (const auto& [rank, c] : view.by_rank) {
    nranks = std::max(nranks, c->comm_nranks);
    if (c->comm_rank >= 0) held.push_back(c->comm_rank);
  }
  held = Sorted(std::move(held));
  held.erase(std::unique(held.begin(), held.end()), held.end());
  if (nranks <= static_cast<int32_t>(view.by_rank.size())) return false;
  std::vector<int32_t> absent;
  for (int32_t i = 0; i < nranks; ++i) {
    if (!Contains(held, i)) absent.push_back(i);
  }
  v->cls = HangClass::kNonCommunication;
  v->team = "operations";
  v->comm_id = comm_id;
  v->stuck_seq = view.stuck_seq;
  SetCulprits(ranks, {}, v);
  const CommState* any = view.by_rank.begin()->second;
  v->reason = "the " + std::to_string(view.by_rank.size()) + " rank(s) the engine holds of " +
              std::to_string(nranks) + " in communicator " + std::to_string(comm_id) +
              " wait inside " + OpName(any->pending_kind) + " seq " +
              std::to_string(view.stuck_seq) + "; its other " +
              std::to_string(nranks - static_cast<int32_t>(view.by_rank.size())) +
              " member(s) (communicator ranks " + Ranks(absent) +
              ") are not held by the engine (refused, see xpu_ingest_rejected_total, or never "
              "reported): the hang is among them";
  return true;
}

// 6. Communication: every member is inside the same collective; the ranks'
// intra-kernel ring progress locates the link where it stops, if it can.
bool ClassifyStuckInside(const std::vector<RankEvidence>& ranks,
                         const std::map<uint64_t, CommView>& comms, Verdict* v) {
  for (const auto& [comm_id, view] : comms) {
    if (view.stuck_seq == 0) continue;
    bool all_in = !view.by_rank.empty();
    for (const auto& [rank, c] : view.by_rank) all_in = all_in && c->pending_seq == view.stuck_seq;
    if (!all_in) continue;
    if (AbsentMembers(ranks, comm_id, view, v)) return true;
    v->cls = HangClass::kCommunication;
    v->team = "infrastructure";  // operations once the ring progress locates the link
    v->comm_id = comm_id;
    v->stuck_seq = view.stuck_seq;
    const CommState* any = view.by_rank.begin()->second;
    v->reason = "all " + std::to_string(view.by_rank.size()) + " ranks issued " +
                OpName(any->pending_kind) + " seq " + std::to_string(view.stuck_seq) +
                " and are stuck inside it";
    const RingFinding f = LocateOnRings(ranks);
    for (const std::string& l : f.lines) v->details.push_back(l);
    std::vector<int32_t> culprits;
    if (!f.link.empty()) {
      // A located link is a network fault (XPUTimer's NCCL hang / RoCE
      // issue): the link, its NICs or the GPUs at its ends.
      v->team = "operations";
      v->faulty_link = f.link;
      culprits = f.from_read ? std::vector<int32_t>{f.from, f.to} : std::vector<int32_t>{f.from};
      v->ring_named = culprits;
      v->details.push_back("progress stops on ring link(s) " + f.links + " on " +
                           std::to_string(f.agree) + " of " + std::to_string(f.channels) +
                           " channel(s)");
    }
    if (culprits.empty()) {
      for (const auto& [rank, c] : view.by_rank) culprits.push_back(rank);
      v->details.push_back(
          f.channels == 0 ? "no intra-kernel progress available: the faulty link is not located"
                          : "intra-kernel progress is uniform: the faulty link is not located");
    }
    SetCulprits(ranks, culprits, v);
    if (!v->faulty_link.empty()) v->reason += "; progress stops on link " + v->faulty_link;
    return true;
  }
  return false;
}

// Whether `r` waits in a collective issued after its overdue kernel that a
// member of the communicator never issued: then the missing peer explains
// the wait, and the kernel (whose completion mark may sit behind the
// collective) is not named stuck.
bool WaitsForMissingPeer(const RankEvidence& r, const std::map<uint64_t, CommView>& comms) {
  for (const CommState& c : r.comms) {
    if (c.pending_seq == 0 || c.pending_since_ns < r.overdue.since_ns) continue;
    auto it = comms.find(c.comm_id);
    if (it == comms.end()) continue;
    for (const auto& [rank, m] : it->second.by_rank) {
      if (m->last_issued < c.pending_seq) return true;
    }
  }
  return false;
}

// 3. A GPU kernel (not a collective) that never completes, on ranks whose
// every other outstanding op is younger and that do not wait for a peer
// that never issued their collective: what the rank waits for.
bool ClassifyStuckKernel(const std::vector<RankEvidence>& ranks,
                         const std::map<uint64_t, CommView>& comms, const ClassifyContext& context,
                         Verdict* v) {
  std::vector<int32_t> stuck;
  for (const RankEvidence& r : ranks) {
    if (!Dead(r) && HasStuckKernel(r) && !WaitsForMissingPeer(r, comms)) stuck.push_back(r.rank);
  }
  if (stuck.empty()) return false;
  stuck = Sorted(std::move(stuck));
  v->cls = HangClass::kNonCommunication;
  v->team = "operations";
  SetCulprits(ranks, stuck, v);
  std::string sites;
  for (const RankEvidence& r : ranks) {
    if (!Contains(stuck, r.rank)) continue;
    const StallSite site = WhereStalled(r, context.now_ns);
    sites += (sites.empty() ? "" : "; ") + ("rank " + std::to_string(r.rank) + ": " + site.summary);
  }
  v->reason = "a GPU kernel never completes on rank(s) " + Ranks(stuck) + " (" + sites +
              "): a faulty GPU or driver, or a kernel that does not terminate";
  DescribeRanks(ranks, stuck, v);
  return true;
}

// 8. Outside collectives: no rank waits in one, and the live ranks make no
// progress (a one-process job; every rank stuck in Python, data loading or
// native code). Each is named with where it sits; ranks at the same place
// share one line.
bool ClassifyOutside(const std::vector<RankEvidence>& ranks, const RankStates& s,
                     const ClassifyContext& context, Verdict* v) {
  if (!s.waiting.empty()) return false;
  std::vector<int32_t> stalled, busy;
  std::map<std::string, std::vector<int32_t>> by_site;
  bool data_loading = false;
  for (const RankEvidence& r : ranks) {
    if (!Contains(s.idle, r.rank)) continue;
    if (!r.open.empty()) busy.push_back(r.rank);
    if (r.progressing || !r.open.empty()) continue;
    stalled.push_back(r.rank);
    const StallSite site = WhereStalled(r, context.now_ns);
    data_loading = data_loading || site.kind == StallSite::Kind::kDataLoading;
    by_site[site.summary].push_back(r.rank);
  }
  stalled = Sorted(std::move(stalled));
  if (stalled.empty() && !busy.empty()) {
    // Nobody is stuck: a rank inside a long host interval (a checkpoint
    // save) is the only reason for the pause.
    v->cls = HangClass::kBusyWait;
    v->team = "";
    SetCulprits(ranks, busy, v);
    for (const RankEvidence& r : ranks) {
      for (const OpenInterval& o : r.open) {
        v->details.push_back("rank " + std::to_string(r.rank) + " busy in " + OpName(o.kind) +
                             " \"" + o.name + "\" since " + std::to_string(o.since_ns));
      }
    }
    v->reason = "rank(s) " + Ranks(busy) +
                " inside an open host interval (e.g. a checkpoint save): not a fault";
    return true;
  }
  if (stalled.empty()) return false;
  v->cls = HangClass::kNonCommunication;
  v->team = "algorithm";
  SetCulprits(ranks, stalled, v);
  std::string where;
  size_t places = 0;
  for (const auto& [summary, rs] : by_site) {
    if (++places > 8) continue;
    where += (where.empty() ? "" : "; ") + ("rank(s) " + Ranks(rs) + " " + summary);
  }
  if (places > 8) where += "; and " + std::to_string(places - 8) + " more place(s)";
  v->reason = "no rank waits in a collective and rank(s) " + Ranks(stalled) +
              " make no progress" + (data_loading ? " (data loading)" : "") + ": " + where;
  DescribeRanks(ranks, stalled, v);
  return true;
}

// 7. Stacks only (no progress table): ranks outside communication code while
// others wait in it, or every rank in communication code.
bool ClassifyFromStacks(const std::vector<RankEvidence>& ranks, Verdict* v) {
  std::vector<int32_t> in_comm, not_comm;
  for (const RankEvidence& r : ranks) (InCommunication(r) ? in_comm : not_comm).push_back(r.rank);
  in_comm = Sorted(std::move(in_comm));
  not_comm = Sorted(std::move(not_comm));
  if (!in_comm.empty() && !not_comm.empty()) {
    v->cls = HangClass::kNonCommunication;
    v->team = "algorithm";
    SetCulprits(ranks, not_comm, v);
    v->reason = "rank(s) " + Ranks(not_comm) + " are outside communication code while rank(s) " +
                Ranks(in_comm) + " wait in it (from stacks)";
    DescribeRanks(ranks, not_comm, v);
    return true;
  }
  if (!in_comm.empty()) {
    v->cls = HangClass::kCommunication;
    v->team = "infrastructure";
    SetCulprits(ranks, in_comm, v);
    v->reason =
        "every rank waits in communication code (from stacks); no progress table to locate the "
        "link";
    return true;
  }
  return false;
}

}  // namespace

Verdict Classify(const std::vector<RankEvidence>& ranks, const ClassifyContext& context) {
  Verdict v;
  const RankStates states = StatesOf(ranks);
  const std::map<uint64_t, CommView> comms = Communicators(ranks);
  if (ClassifyCrash(ranks, states, &v) || ClassifyStopped(ranks, states, &v) ||
      ClassifyStuckKernel(ranks, comms, context, &v) || ClassifyBusyWait(ranks, states, &v)) {
    return v;
  }
  if (ClassifySequences(ranks, comms, context, &v) || ClassifyStuckInside(ranks, comms, &v) ||
      ClassifyOutside(ranks, states, context, &v) || ClassifyFromStacks(ranks, &v)) {
    return v;
  }
  v.reason = "no rank waits in a collective and none is known to be stuck: no hang pattern "
             "recognised";
  return v;
}

}  // namespace xpu::engine::hang
