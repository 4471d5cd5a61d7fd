// clock_align — per-host clock offsets estimated from collective completion.
//
// Every record time is the host's CLOCK_REALTIME (record.h), so ranks on
// different hosts disagree by the hosts' clock error (NTP keeps it at
// 0.1–10 ms, too much to line kernels up). A collective (AllReduce,
// AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter;
// not Send/Recv) finishes at the same instant on all its members: nobody
// completes before the last data arrives. So for an instance (comm_id, seq)
// seen on hosts a and b, end_b - end_a is a sample of offset_b - offset_a
// plus noise (completion-detection jitter, a member's kernel tail).
//
// Estimator: per host and instance, the median end of its members there; per
// host pair, the median of the differences over all instances they share
// (robust to a minority of bad samples); offsets then follow a maximum
// spanning tree of the host graph weighted by shared instances, rooted at
// the reference rank's host (offset 0). Hosts with no collective path to the
// reference are reported as not aligned (offset 0).
//
// Only GPU-timed records (XPU_REC_TIMED) are used.
//
// Thread-safety: pure function.
#ifndef XPU_COMMON_TIMELINE_CLOCK_ALIGN_H_
#define XPU_COMMON_TIMELINE_CLOCK_ALIGN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/timeline/rank_dump.h"

namespace xpu::timeline {

struct HostOffset {
  std::string host;
  int64_t offset_ns = 0;  // subtract from this host's timestamps
  uint64_t samples = 0;   // instances on the edge that aligned it (0 for the reference)
  double spread_ns = 0;   // median absolute deviation of those samples
  bool aligned = false;   // reference, or reached through collectives
  std::string via;        // host it was aligned against
};

struct ClockAlignment {
  int32_t reference_rank = -1;
  std::string reference_host;
  std::vector<HostOffset> hosts;  // sorted by host name
  uint64_t instances = 0;         // collective instances spanning >= 2 hosts
  int64_t OffsetFor(const std::string& host) const;
};

// reference_rank < 0: the lowest rank present.
ClockAlignment EstimateClockOffsets(const std::vector<RankDump>& ranks,
                                    int32_t reference_rank = -1);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_CLOCK_ALIGN_H_
