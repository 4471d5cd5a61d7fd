// engine/hang/cuda_gdb.h — intra-kernel tracing of a communication hang on
// real GPUs: cuda-gdb attaches to every stuck process (in parallel, one per
// rank, by the node daemons), reads the ring progress of the NCCL kernel on
// each channel, and detaches. This file generates the command scripts and
// parses their output; it is exercised with recorded / synthetic output
// because the machines that build it have no GPU.
//
// Two phases, so that the second script addresses only what exists:
//   1. `info cuda kernels` (KernelListScript) -> ParseCudaKernels: NCCL
//      kernels (ncclDevKernel_* / ncclKernel_*) with their grid size; the
//      protocol (SIMPLE / LL / LL128) is read from the kernel name.
//   2. ProgressScript: for each NCCL kernel and block (= channel), focus
//      thread 0 and printf "XPU-NCCL ..." lines with the ring neighbours and
//      the connection counters of NCCL 2.28's shared state
//      (ncclShmem.channel.ring.{prev,next},
//       ncclShmem.groups[0].recvConns[0]->{step,*tail},
//       ncclShmem.groups[0].sendConns[0]->{step,*head}); for LL / LL128 the
//      flag of the first receive-buffer line, which carries the step of the
//      last line received. NCCL as shipped has no debug info for ncclShmem,
//      so the fields are read as raw memory at NCCL 2.28's offsets
//      (NcclLayout in cuda_gdb.cc). ParseProgress reads the lines back; a
//      block whose expressions fail is reported with cuda-gdb's error.
// Progress of a rank on a channel = steps its predecessor delivered to it
// (recv tail for SIMPLE, LL/LL128 flag otherwise). Along the ring, progress
// stops right behind the faulty link (classify.h FindStalledLink).
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_CUDA_GDB_H_
#define XPU_ENGINE_HANG_CUDA_GDB_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/hang/classify.h"

namespace xpu::engine::hang {

enum class NcclProto { kUnknown, kSimple, kLL, kLL128 };
const char* NcclProtoName(NcclProto p);

struct CudaKernel {
  int id = -1;        // cuda-gdb kernel id
  int device = -1;
  int grid_x = 0;     // blocks = channels
  std::string name;
  NcclProto proto = NcclProto::kUnknown;
};

struct ChannelProgress {
  int kernel = -1;
  int channel = -1;
  int ring_prev = -1, ring_next = -1;
  uint64_t recv_step = 0, recv_tail = 0, send_step = 0, send_head = 0, ll_flag = 0;
  uint64_t ll128_flag = 0;  // from BlindProgressCommands (protocol not known yet)
  bool ok = false;
  std::string error;
  // Steps delivered to this rank by its ring predecessor.
  uint64_t Progress(NcclProto proto) const;
};

std::string KernelListScript();
std::vector<CudaKernel> ParseCudaKernels(std::string_view info_cuda_kernels);
// `max_channels` bounds the blocks visited per kernel.
std::string ProgressScript(const std::vector<CudaKernel>& kernels, int max_channels = 64);
std::vector<ChannelProgress> ParseProgress(std::string_view output);
// The same reads for kernel ids 0..max_kernels-1 and blocks
// 0..max_channels-1 with the flags of both LL protocols, preceded by
// `info cuda kernels` (after an "XPU-CUDA-KERNELS" line): one attach can
// then take the native stacks, list the kernels and read the progress; the
// reader keeps the channels of the NCCL kernels the list shows (blocks
// beyond a kernel's grid, or kernels that do not exist, just print errors).
std::string BlindProgressCommands(int max_kernels, int max_channels);
// Command line for one rank: every script line becomes one -ex, so that a
// failing expression does not end the run (as it would end a -x file).
std::vector<std::string> CudaGdbCommand(int pid, const std::string& script);

// Per rank, its channel progress; returns per channel the KernelProgress
// entries (ring positions from following ring_next from the lowest rank).
std::vector<KernelProgress> RingProgressFromCudaGdb(
    const std::map<int32_t, std::vector<ChannelProgress>>& by_rank, NcclProto proto,
    std::map<int32_t, std::vector<KernelProgress>>* out_by_rank);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_CUDA_GDB_H_
