// synthetic_job — a deterministic multi-host training job as the daemons
// would report it (one xpu.v1.ProcessBatch per rank, records packed), for
// the timeline tests and bench/timeline. Ground truth is known: every host
// clock is shifted by a chosen offset, so clock alignment can be checked.
//
// Per step and rank: a step marker; per layer a kernel, a GEMM and the
// GEMM's Python call-site link (record.h XPU_OP_PY_CALLSITE: the launch's
// sig_id, seq and stream; "forward" stacks on even layers, "backward" on odd
// ones); one data-parallel AllReduce over all ranks (comm_id kWorldComm)
// whose members start at different times but end together (true time), plus
// completion jitter and rare outliers, with its own call-site link; a
// DataLoader host event between steps. Every GEMM and AllReduce is "sampled".
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_TIMELINE_SYNTHETIC_JOB_H_
#define XPU_COMMON_TIMELINE_SYNTHETIC_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "xpu/v1/common.pb.h"

namespace xpu::timeline {

struct SyntheticJob {
  std::string job = "synthetic";
  int ranks = 8;
  int ranks_per_host = 4;
  int layers = 4;
  int steps = 10;
  uint64_t t0_ns = 1700000000000000000ull;
  // Clock offset of host h (ns); missing entries are 0. Host 0 is typically
  // the reference (rank 0).
  std::vector<int64_t> host_offsets_ns;
  uint64_t end_jitter_ns = 2000;   // uniform in [-j, +j] on each member's end
  double outlier_fraction = 0.05;  // of collective ends delayed by 300 us
  int exited_rank = -1;            // marked exited
  uint64_t seed = 1;
};

inline constexpr uint64_t kWorldComm = 0xC0FFEE;
// Records one rank holds (every step complete).
size_t SyntheticOpsPerRank(const SyntheticJob& j);
// Steps needed for about `ops` records per rank.
int SyntheticStepsFor(const SyntheticJob& j, size_t ops);
std::string SyntheticHost(int host);
xpu::v1::ProcessBatch SyntheticRank(const SyntheticJob& j, int rank);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_SYNTHETIC_JOB_H_
