// daemon/evidence/cuda_gdb_probe.h — intra-kernel progress of the NCCL
// kernels of one process on real GPUs, read with cuda-gdb.
//
// The native-stack run of the evidence collector (cuda-gdb) appends, when
// the process has an outstanding collective, the commands of
// common/cuda_gdb/cuda_gdb.h BlindProgressCommands (one -ex each, same attach):
// `info cuda kernels`, `info cuda devices`, and for the first kernels and
// blocks the NCCL shared state read at both possible places of ncclShmem.
// ChannelsToProgress keeps the blocks of the NCCL kernels the list shows,
// the readings at the place the device's SM version implies, and turns each
// channel into an IntraKernelProgress (source "cuda-gdb", channel
// "ch<ncclShmem.channelId>", ring_prev/ring_next, step = steps the ring
// predecessor delivered in the running kernel by whichever protocol's
// counters moved, sent = steps the successor consumed). A
// channel whose expressions failed or gave an implausible ring carries the
// reason in `detail`, so the report says what could and could not be read.
// The engine orders the ring from ring_next and compares progress along it.
//
// Thread-safety: reentrant (one debugger child per call).
#ifndef XPU_DAEMON_EVIDENCE_CUDA_GDB_PROBE_H_
#define XPU_DAEMON_EVIDENCE_CUDA_GDB_PROBE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

// The outstanding collective the kernels belong to (from the hook's
// per-communicator progress); fills the IntraKernelProgress fields that
// cuda-gdb cannot know.
struct PendingCollective {
  int32_t comm_rank = -1;
  int32_t comm_nranks = 0;
  uint64_t pending_seq = 0;
  uint64_t completed_seq = 0;
};

// True when the hook's progress shows an outstanding collective; `*out` gets
// the oldest one.
bool FindPendingCollective(const xpu::v1::HangProgress& progress, PendingCollective* out);

// `kernel_list`: cuda-gdb's `info cuda kernels` output (and `info cuda
// devices` after an XPU-CUDA-DEVICES line); `progress_output`:
// the XPU-NCCL lines of common/cuda_gdb/cuda_gdb.h's commands (both may be the
// same text, any other lines are ignored). One entry per channel of an NCCL
// kernel the list shows.
std::vector<xpu::v1::IntraKernelProgress> ChannelsToProgress(std::string_view kernel_list,
                                                             std::string_view progress_output,
                                                             const PendingCollective& pending);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_CUDA_GDB_PROBE_H_
