// collective_table — every member's record of each collective, keyed by
// (comm_id, seq), so that later analyses can compare the ranks of one
// collective (last arrival, issue latency, stragglers).
//
// Bandwidth uses the last-arrival method of the XPUTimer paper: a collective
// cannot progress before its last member starts, so its effective time is
// max(end) - max(start) over the members, and busbw = bytes * factor / time
// (factor and bytes from formulas.h). Only collectives whose every member was
// GPU-timed (XPU_REC_TIMED) count. The rule itself is
// common/analysis/collective.h LastArrivalFold, shared with the analyses.
//
// Bounded: at most max_seqs_per_comm entries per communicator, oldest evicted.
// Thread-safety: none; owned by a JobState and guarded by its lock.
#ifndef XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_
#define XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "engine/state/batch_decoder.h"
#include "xpu/record.h"

namespace xpu::engine {

struct CollectiveMember {
  int32_t rank = -1;       // global rank of the process (-1 unknown)
  int32_t comm_rank = -1;  // rank inside the communicator
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  int32_t issue_latency_ns = 0;
  bool issue_latency_valid = false;
  bool timed = false;
};

struct CollectiveEntry {
  uint64_t comm_id = 0;
  uint32_t seq = 0;
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
  double busbw_factor = 0;
  std::vector<CollectiveMember> members;
  bool complete = false;
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
  explicit CollectiveTable(size_t max_seqs_per_comm = 1024)
      : max_seqs_per_comm_(max_seqs_per_comm) {}

  // `sig` must describe a collective (sig.collective).
  void Add(const SignatureInfo& sig, int32_t rank, const xpu_record_v1& r);
  const CollectiveEntry* Find(uint64_t comm_id, uint32_t seq) const;
  // Per op kind, the collectives that completed since the previous call.
  std::map<uint16_t, OpBandwidth> TakeCompleted();
  size_t size() const { return entries_.size(); }

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
  void Complete(CollectiveEntry& e);

  size_t max_seqs_per_comm_;
  std::unordered_map<Key, CollectiveEntry, KeyHash> entries_;
  std::unordered_map<uint64_t, std::deque<uint32_t>> order_;  // comm_id -> seqs, oldest first
  std::map<uint16_t, OpBandwidth> completed_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_COLLECTIVE_TABLE_H_
