// collective — bandwidth of communication, measured the XPUTimer way and
// localized the TFD way.
//
// Last-arrival method: a collective cannot progress before its last member
// has started, so its effective time is max(end) - max(start) over the
// members' kernels, and busbw = bytes × factor / time (formulas.h). Only
// instances whose every member was GPU-timed and present are measured.
//
// Localization (TFD): within one communicator all members see the same
// collective time, so a slow member is found by comparing (a) point-to-point
// links — a ring's send/recv pairs: one slow member slows the links that touch
// it, a slow ring slows all — and (b) communicators of the same class: the
// communicators that contain a slow member are slow, the others are not.
#ifndef XPU_COMMON_ANALYSIS_COLLECTIVE_H_
#define XPU_COMMON_ANALYSIS_COLLECTIVE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/analysis/trace.h"

namespace xpu::analysis {

struct CollMember {
  int32_t rank = -1;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool timed = false;
};

struct CollInstance {
  uint64_t comm_id = 0;
  uint32_t seq = 0;
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;
  double factor = 0;
  std::vector<CollMember> members;
};

struct LastArrival {
  bool valid = false;      // every member present and GPU-timed, time > 0
  int32_t last_rank = -1;  // the member that started last
  uint64_t last_start_ns = 0;
  uint64_t end_ns = 0;
  double seconds = 0;
  double algbw = 0;  // bytes / s
  double busbw = 0;  // bytes × factor / s
};

// The last-arrival rule, fed one member at a time: the engine's collective
// table folds members as their records arrive, MeasureLastArrival folds a
// grouped instance. This is the one place the rule is computed.
class LastArrivalFold {
 public:
  // Adds a member; returns false once a member was not GPU-timed (the
  // instance cannot be measured, Result() is invalid).
  bool Add(int32_t rank, uint64_t start_ns, uint64_t end_ns, bool timed);
  // The measurement of the members added so far for an instance of `bytes`
  // with bus-bandwidth factor `factor`.
  LastArrival Result(uint64_t bytes, double factor) const;

 private:
  LastArrival acc_;  // last_rank, last_start_ns, end_ns so far
  bool any_ = false;
  bool untimed_ = false;
};

// Collectives (not send/recv) of all ranks grouped by (comm_id, seq),
// restricted to instances whose first member starts in [from_ns, to_ns).
std::vector<CollInstance> GroupCollectives(const std::vector<RankTrace>& ranks,
                                           uint64_t from_ns = 0, uint64_t to_ns = UINT64_MAX);
LastArrival MeasureLastArrival(const CollInstance& c);

// Aggregate over the measured instances of one communicator and op kind.
struct CommBandwidth {
  uint64_t comm_id = 0;
  uint16_t kind = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;       // bytes of one instance (the most frequent size)
  std::set<int32_t> ranks;  // global ranks of the members
  std::set<std::string> hosts;
  uint64_t count = 0;
  double bus_bytes = 0;
  double seconds = 0;
  double BusBw() const { return seconds > 0 ? bus_bytes / seconds : 0; }
  // Comparable communicators: same op, same size and same member count.
  std::string ClassKey() const;
};
std::vector<CommBandwidth> CommunicatorBandwidth(const std::vector<RankTrace>& ranks,
                                                 uint64_t from_ns = 0, uint64_t to_ns = UINT64_MAX);

// One directed point-to-point link src -> dst (global ranks), measured from
// the sender's Send and the receiver's matching Recv (k-th with k-th) with
// the last-arrival method: bytes / (max(end) - max(start)).
struct LinkBandwidth {
  int32_t src = -1, dst = -1;
  std::string src_host, dst_host;
  uint64_t count = 0;
  double bytes = 0;
  double seconds = 0;
  double Bw() const { return seconds > 0 ? bytes / seconds : 0; }
  bool inter_node() const { return src_host != dst_host; }
};
std::vector<LinkBandwidth> P2pLinks(const std::vector<RankTrace>& ranks, uint64_t from_ns = 0,
                                    uint64_t to_ns = UINT64_MAX);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_COLLECTIVE_H_
