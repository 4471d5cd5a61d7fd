#include "engine/state/collective_table.h"

#include <algorithm>

#include "xpu/formulas.h"

namespace xpu::engine {
namespace {

bool TestAndSet(std::vector<uint64_t>& bits, int32_t i) {
  uint64_t& w = bits[static_cast<size_t>(i) >> 6];
  const uint64_t m = 1ull << (static_cast<unsigned>(i) & 63u);
  const bool was = (w & m) != 0;
  w |= m;
  return was;
}

}  // namespace

void CollectiveTable::MarkDone(CommTrack& c, uint32_t seq) {
  if (seq > c.high) {
    const uint32_t shift = seq - c.high;
    c.done_mask = shift >= 64 ? 0 : c.done_mask << shift;
    c.high = seq;
  }
  const uint32_t back = c.high - seq;
  if (back < 64) c.done_mask |= 1ull << back;
}

bool CollectiveTable::Completed(uint64_t comm_id, uint32_t seq) const {
  auto it = comms_.find(comm_id);
  if (it == comms_.end() || seq > it->second.high) return false;
  const uint32_t back = it->second.high - seq;
  return back < 64 && ((it->second.done_mask >> back) & 1u) != 0;
}

void CollectiveTable::Add(const SignatureInfo& sig, int32_t rank, const xpu_record_v1& r) {
  const uint64_t comm_id = sig.abi.comm_id;
  const int32_t nranks = sig.abi.comm_nranks, member = sig.abi.comm_rank;
  if (nranks <= 0 || nranks > kMaxCommRanks || member < 0 || member >= nranks) {
    ++skipped_;
    return;
  }
  CommTrack& c = comms_[comm_id];
  if (r.seq <= c.high && (c.high - r.seq >= 64 || ((c.done_mask >> (c.high - r.seq)) & 1u))) {
    return;  // completed (or too old to matter): a late or repeated record
  }
  const Key key{comm_id, r.seq};
  auto it = open_.find(key);
  if (it == open_.end()) {
    if (open_.size() >= kMaxOpenTotal) {
      ++skipped_;
      return;
    }
    it = open_.emplace(key, CollectiveEntry{}).first;
    CollectiveEntry& e = it->second;
    e.comm_id = comm_id;
    e.seq = r.seq;
    e.kind = sig.abi.kind;
    e.nranks = nranks;
    e.bytes = sig.bytes;
    e.busbw_factor = sig.busbw_factor;
    const size_t words = (static_cast<size_t>(nranks) + 63) / 64;
    e.reported_bits.assign(words, 0);
    e.timed_bits.assign(words, 0);
    NoteShape(c, r.seq, ShapeKind{e.kind, e.nranks, e.bytes});
    c.open.push_back(r.seq);
    if (c.open.size() > max_open_per_comm_) {
      const size_t drop = c.open.size() - max_open_per_comm_;
      for (size_t i = 0; i < drop; ++i) open_.erase(Key{comm_id, c.open[i]});
      c.open.erase(c.open.begin(), c.open.begin() + static_cast<long>(drop));
    }
    it = open_.find(key);
    if (it == open_.end()) return;  // max_open_per_comm_ == 0
  }
  CollectiveEntry& e = it->second;
  if (member >= e.nranks) {  // the signature changed size under the same seq
    ++skipped_;
    return;
  }
  if (!TestAndSet(e.reported_bits, member)) ++e.members;
  // With the NCCL profiler plugin a member sends two records for one
  // occurrence: the interposer's (not timed) and the plugin's (timed), in
  // either order. Only the first timed one counts.
  if ((r.flags & XPU_REC_TIMED) == 0 || TestAndSet(e.timed_bits, member)) return;
  ++e.timed;
  e.fold.Add(rank, r.start_ns, r.start_ns + xpu_record_duration_ns(&r), true);
  if (static_cast<int32_t>(e.timed) < e.nranks) return;
  Complete(e);
  MarkDone(c, r.seq);
  c.open.erase(std::find(c.open.begin(), c.open.end(), r.seq));
  open_.erase(it);
}

void CollectiveTable::Complete(CollectiveEntry& e) {
  const analysis::LastArrival la = e.fold.Result(e.bytes, e.busbw_factor);
  if (!la.valid || e.bytes == 0) return;
  OpBandwidth& bw = completed_[e.kind];
  ++bw.count;
  bw.bus_bytes += static_cast<double>(e.bytes) * e.busbw_factor;
  bw.seconds += la.seconds;
}

const CollectiveEntry* CollectiveTable::Find(uint64_t comm_id, uint32_t seq) const {
  auto it = open_.find(Key{comm_id, seq});
  return it == open_.end() ? nullptr : &it->second;
}

void CollectiveTable::NoteShape(CommTrack& c, uint32_t seq, const ShapeKind& shape) {
  if (c.shape_of.empty()) c.shape_of.assign(kShapeHistory, kNoShape);
  if (seq > c.newest) {
    // The seqs skipped since the newest were not seen (as far back as the
    // history goes).
    const uint32_t gap = std::min(seq - c.newest - 1, kShapeHistory);
    for (uint32_t s = seq - gap; s != seq; ++s) c.shape_of[s & (kShapeHistory - 1)] = kNoShape;
    c.newest = seq;
    c.shape_of[seq & (kShapeHistory - 1)] = Intern(c, shape);
    return;
  }
  if (c.newest - seq >= kShapeHistory) return;  // older than the history
  uint16_t& slot = c.shape_of[seq & (kShapeHistory - 1)];
  if (slot == kNoShape) slot = Intern(c, shape);
}

uint16_t CollectiveTable::Intern(CommTrack& c, const ShapeKind& shape) {
  // Newest first: a step's shapes were interned a step ago.
  for (size_t i = c.distinct.size(); i-- > 0;) {
    if (c.distinct[i] == shape) return static_cast<uint16_t>(i);
  }
  if (c.distinct.size() >= 2 * kShapeHistory) CompactShapes(c);
  c.distinct.push_back(shape);
  return static_cast<uint16_t>(c.distinct.size() - 1);
}

void CollectiveTable::CompactShapes(CommTrack& c) {
  std::vector<ShapeKind> kept;
  std::vector<uint16_t> moved(c.distinct.size(), kNoShape);
  for (uint16_t& slot : c.shape_of) {
    if (slot == kNoShape) continue;
    if (moved[slot] == kNoShape) {
      moved[slot] = static_cast<uint16_t>(kept.size());
      kept.push_back(c.distinct[slot]);
    }
    slot = moved[slot];
  }
  c.distinct = std::move(kept);
}

bool CollectiveTable::Shape(uint64_t comm_id, uint32_t seq, CollectiveShape* out) const {
  auto it = comms_.find(comm_id);
  if (it == comms_.end() || seq == 0) return false;
  const CommTrack& c = it->second;
  if (c.shape_of.empty() || seq > c.newest || c.newest - seq >= kShapeHistory) return false;
  const uint16_t slot = c.shape_of[seq & (kShapeHistory - 1)];
  if (slot == kNoShape) return false;
  const ShapeKind& k = c.distinct[slot];
  *out = CollectiveShape{seq, k.kind, k.nranks, k.bytes};
  return true;
}

std::map<uint16_t, OpBandwidth> CollectiveTable::TakeCompleted() {
  std::map<uint16_t, OpBandwidth> out;
  out.swap(completed_);
  return out;
}

}  // namespace xpu::engine
