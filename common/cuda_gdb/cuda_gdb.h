// common/cuda_gdb/cuda_gdb.h — intra-kernel tracing of a communication hang on
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
//      thread 0 and printf "XPU-NCCL ..." lines with NCCL 2.28's per-block
//      shared state: ncclShmem.channelId, ncclShmem.channel.ring.{prev,
//      next,index}, and through ncclShmem.channel.peers the ring's two
//      connections: recv[0] from the predecessor {step, *tail, the flags of
//      the first line of each of the NCCL_STEPS LL and LL128 buffer slots}
//      and send[0] to the successor {step, *head}. NCCL as shipped has no
//      debug info for ncclShmem, so the fields are read as raw memory at
//      NCCL 2.28's offsets (NcclLayout in cuda_gdb.cc), from the start of
//      the block's shared window: 0x400 on sm_90 and later (the first 1 KiB
//      is reserved there; NCCL's SASS addresses ncclShmem at 0x400), 0
//      before. Both are read; the reader keeps the one that matches the
//      device's SM version (`info cuda devices`) and gives plausible ring
//      neighbours. ParseProgress reads the lines back; a block whose
//      expressions fail is reported with cuda-gdb's error.
// Progress of a rank on a channel = steps its predecessor delivered to it in
// the running kernel: conn->step holds the step count at the kernel's start
// (the primitives write it back at the end), so SIMPLE delivered =
// *tail - step, LL / LL128 delivered = highest slot flag - step (a line's
// flag is its step + 1). Along the ring, progress stops right behind the
// faulty link (engine/hang/classify.h LocateOnRings; the engine builds its
// input from these readings in engine/hang/cuda_gdb_rings.h).
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_CUDA_GDB_CUDA_GDB_H_
#define XPU_COMMON_CUDA_GDB_CUDA_GDB_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace xpu::cuda_gdb {

enum class NcclProto { kUnknown, kSimple, kLL, kLL128 };
const char* NcclProtoName(NcclProto p);

struct CudaKernel {
  int id = -1;  // cuda-gdb kernel id
  int device = -1;
  int grid_x = 0;  // blocks = channels
  std::string name;
  // From the name. NCCL 2.28 specializes one entry kernel per collective,
  // type and algorithm (..._RING_LL) and runs every protocol through it, so
  // this is the specialization, not necessarily the protocol in use
  // (ChannelProgress::Delivered tells that from the counters).
  NcclProto proto = NcclProto::kUnknown;
};

constexpr int kNcclSteps = 8;  // NCCL_STEPS: buffer slots per connection

struct ChannelProgress {
  int kernel = -1;
  int block = -1;       // block index in the kernel
  int base = -1;        // shared-window offset the reads took ncclShmem at
  int channel_id = -1;  // ncclShmem.channelId: the ring channel (key across ranks)
  int ring_prev = -1, ring_next = -1, ring_index = -1;
  uint64_t recv_step = 0, recv_tail = 0, send_step = 0, send_head = 0;
  uint32_t ll_flags[kNcclSteps] = {};     // first line of each LL slot
  uint64_t ll128_flags[kNcclSteps] = {};  // first line of each LL128 slot
  bool has_tail = false, has_ll = false, has_ll128 = false;
  bool ok = false;
  std::string error;
  // Steps delivered to this rank by its ring predecessor in the running
  // kernel (see above); 0 when the protocol's counters were not readable.
  uint64_t Progress(NcclProto proto) const;
  // The same whatever the protocol: the largest of the three. Counters of a
  // protocol the kernel does not use are stale (at most the step count at
  // the kernel's start) and give 0. `proto_out` (optional) gets the
  // protocol whose counters moved (kUnknown when none did).
  uint64_t Delivered(NcclProto* proto_out = nullptr) const;
  // Steps the ring successor consumed from this rank in the running kernel
  // (*head - send step; every protocol returns credits through head).
  uint64_t Consumed() const { return send_head > send_step ? send_head - send_step : 0; }
};

std::string KernelListScript();
std::vector<CudaKernel> ParseCudaKernels(std::string_view info_cuda_kernels);
// SM version (90 for sm_90) from `info cuda devices` output that follows an
// "XPU-CUDA-DEVICES" line in `text` (as BlindProgressCommands prints it);
// 0 when absent.
int ParseSmVersion(std::string_view text);
// Shared-window offset of ncclShmem for an SM version: 0x400 from sm_90 on,
// 0 before; -1 when the version is unknown (0).
int SharedBaseForSm(int sm);
// `max_channels` bounds the blocks visited per kernel.
std::string ProgressScript(const std::vector<CudaKernel>& kernels, int max_channels = 64);
std::vector<ChannelProgress> ParseProgress(std::string_view output);
// The same reads for kernel ids 0..max_kernels-1 and blocks
// 0..max_channels-1 with the flags of both LL protocols, preceded by
// `info cuda kernels` (after an "XPU-CUDA-KERNELS" line) and `info cuda
// devices` (after "XPU-CUDA-DEVICES"): one attach can
// then take the native stacks, list the kernels and read the progress; the
// reader keeps the channels of the NCCL kernels the list shows (blocks
// beyond a kernel's grid, or kernels that do not exist, just print errors).
std::string BlindProgressCommands(int max_kernels, int max_channels);
// Appends "-ex LINE" for every non-empty line of `script`: a failing
// expression then does not end the run (as it would end a -x file).
void AppendExCommands(const std::string& script, std::vector<std::string>* argv);
// Command line for one rank: cuda-gdb attached in batch mode, the script as
// AppendExCommands gives it.
std::vector<std::string> CudaGdbCommand(int pid, const std::string& script);

}  // namespace xpu::cuda_gdb

#endif  // XPU_COMMON_CUDA_GDB_CUDA_GDB_H_
