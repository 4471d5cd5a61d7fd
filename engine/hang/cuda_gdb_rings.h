// engine/hang/cuda_gdb_rings.h — from the ring readings cuda-gdb took on
// every rank of a hung collective (common/cuda_gdb/cuda_gdb.h; the daemons
// run the scripts and ship one reading per channel) to the intra-kernel
// progress the classifier reads (classify.h KernelProgress, LocateOnRings).
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_CUDA_GDB_RINGS_H_
#define XPU_ENGINE_HANG_CUDA_GDB_RINGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/hang/classify.h"

namespace xpu::engine::hang {

// One rank's reading of one ring channel, as the daemon ships it.
struct RingReading {
  int channel = -1;  // ncclShmem.channelId
  int32_t ring_prev = -1, ring_next = -1;
  uint64_t steps = 0;  // cuda_gdb::ChannelProgress::Delivered
  uint64_t sent = 0;   // cuda_gdb::ChannelProgress::Consumed
};

// Per rank (communicator rank), its readings; returns per channel the
// KernelProgress entries of the ranks read. Ring order follows ring_next;
// a member that was not read (stopped, gone, not in the kernel) keeps its
// place from its neighbours' ring_next / ring_prev, so a partial ring still
// gives every read rank its predecessor (KernelProgress::prev_rank) and its
// position when the order closes.
std::vector<KernelProgress> RingProgressFromCudaGdb(
    const std::map<int32_t, std::vector<RingReading>>& by_rank, const std::string& source,
    std::map<int32_t, std::vector<KernelProgress>>* out_by_rank);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_CUDA_GDB_RINGS_H_
