// collective_table — folds every member's record of each collective, keyed
// by (comm_id, seq), into the collective's last-arrival bandwidth as the
// records arrive.
//
// Bandwidth uses the last-arrival method of the XPUTimer paper: a collective
// cannot progress before its last member starts, so its effective time is
// max(end) - max(start) over the members, and busbw = bytes * factor / time
// (factor and bytes from formulas.h). Only collectives whose every member was
// GPU-timed (XPU_REC_TIMED) count. The rule itself is
// common/analysis/collective.h LastArrivalFold, shared with the analyses.
//
// Cost: O(1) per record and O(nranks / 4) bytes per collective in flight,
// whatever the communicator's size. A collective in flight keeps two bit
// sets over its communicator ranks (reported, timed) and the fold of its
// timed members; it is forgotten once every member sent a timed record (its
// bandwidth moves to the completed figures), and the last 64 completed
// sequence numbers of each communicator are remembered so that a late record
// of one of them (the interposer's untimed record after the plugin's timed
// one, a re-sent batch) does not open it again. The shapes (kind, bytes,
// size, as its first member reported it) of the last kShapeHistory sequence
// numbers seen are kept too, whether they completed, are in flight or were
// dropped before every member timed them: the job's per-step pattern of
// collectives, which hang diagnosis reads at a mismatch. A step repeats a
// few shapes, so each sequence number keeps a 2-byte index into the
// communicator's distinct shapes (about 1 KB per communicator, allocated at
// its first collective; a job of 100k ranks in tensor, pipeline and data
// parallel groups has tens of thousands of communicators). A member is its
// communicator rank (the signature's comm_rank); records whose comm_rank is
// outside [0, comm_nranks) cannot be placed and are skipped (counted). A
// member's first timed record is the one folded; later ones are ignored.
//
// Bounded: at most max_open_per_comm collectives in flight per communicator
// (the oldest is dropped when a newer one opens), at most kMaxOpenTotal in
// the table, and communicators of at most kMaxCommRanks ranks.
// Thread-safety: none; owned by a JobState and guarded by its lock.
#ifndef XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_
#define XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "common/analysis/collective.h"
#include "engine/state/batch_decoder.h"
#include "xpu/record.h"

namespace xpu::engine {

// A collective in flight.
struct CollectiveEntry {
  uint64_t comm_id = 0;
  uint32_t seq = 0;
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
  double busbw_factor = 0;
  uint32_t members = 0;                             // communicator ranks that reported it
  uint32_t timed = 0;                               // ... with a GPU-timed record
  analysis::LastArrivalFold fold;                   // over the timed members
  std::vector<uint64_t> reported_bits, timed_bits;  // by communicator rank
};

// What a collective was, in flight or recently completed.
struct CollectiveShape {
  uint32_t seq = 0;
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
};

// Completed collectives of one op kind since the last TakeCompleted().
struct OpBandwidth {
  uint64_t count = 0;
  double bus_bytes = 0;  // sum of bytes * factor
  double seconds = 0;    // sum of last-arrival times
  double BusBw() const { return seconds > 0 ? bus_bytes / seconds : 0; }
};

class CollectiveTable {
 public:
  static constexpr int32_t kMaxCommRanks = 1 << 22;
  static constexpr size_t kMaxOpenTotal = 1 << 16;
  static constexpr uint32_t kShapeHistory = 512;  // per communicator, a power of two

  explicit CollectiveTable(size_t max_open_per_comm = 64) : max_open_per_comm_(max_open_per_comm) {}

  // `sig` must describe a collective (sig.collective).
  void Add(const SignatureInfo& sig, int32_t rank, const xpu_record_v1& r);
  // The collective while in flight; nullptr once completed (or never seen).
  const CollectiveEntry* Find(uint64_t comm_id, uint32_t seq) const;
  // The collective's shape (as its first member reported it) when its seq is
  // among the communicator's last kShapeHistory seen; false otherwise.
  bool Shape(uint64_t comm_id, uint32_t seq, CollectiveShape* out) const;
  // True when the collective completed among the communicator's last 64.
  bool Completed(uint64_t comm_id, uint32_t seq) const;
  // Per op kind, the collectives that completed since the previous call.
  std::map<uint16_t, OpBandwidth> TakeCompleted();
  size_t size() const { return open_.size(); }   // collectives in flight
  uint64_t skipped() const { return skipped_; }  // records that could not be placed

 private:
  struct Key {
    uint64_t comm_id;
    uint32_t seq;
    bool operator==(const Key& o) const { return comm_id == o.comm_id && seq == o.seq; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.comm_id * 0x9E3779B97F4A7C15ull ^ k.seq);
    }
  };
  // A shape without its sequence number.
  struct ShapeKind {
    uint16_t kind = 0;
    int32_t nranks = 0;
    uint64_t bytes = 0;
    bool operator==(const ShapeKind& o) const {
      return kind == o.kind && nranks == o.nranks && bytes == o.bytes;
    }
  };
  static constexpr uint16_t kNoShape = UINT16_MAX;
  struct CommTrack {
    uint32_t high = 0;           // highest completed seq
    uint64_t done_mask = 0;      // bit i: seq high - i completed
    std::vector<uint32_t> open;  // seqs in flight, oldest first (a few)
    // Shapes of the seqs in (newest - kShapeHistory, newest]: by seq %
    // kShapeHistory, an index into `distinct` or kNoShape (not seen).
    std::vector<uint16_t> shape_of;
    uint32_t newest = 0;
    std::vector<ShapeKind> distinct;  // at most 2 x kShapeHistory (CompactShapes)
  };
  void MarkDone(CommTrack& c, uint32_t seq);
  // The shape of `seq` as its first member reported it.
  static void NoteShape(CommTrack& c, uint32_t seq, const ShapeKind& shape);
  static uint16_t Intern(CommTrack& c, const ShapeKind& shape);
  // Keeps only the shapes that seqs in the history use.
  static void CompactShapes(CommTrack& c);
  void Complete(CollectiveEntry& e);

  size_t max_open_per_comm_;
  absl::flat_hash_map<Key, CollectiveEntry, KeyHash> open_;
  absl::flat_hash_map<uint64_t, CommTrack> comms_;
  std::map<uint16_t, OpBandwidth> completed_;
  uint64_t skipped_ = 0;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_
