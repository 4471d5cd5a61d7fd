// daemon/evidence/fake_nccl_probe.h — intra-kernel progress from the GPU-less
// test runtime: the fake NCCL's shared-memory segments
// (tests/fake_runtime/fake_nccl_shm.h) carry per-rank arrival, completion
// and ring-step counters. This is the stand-in for reading the NCCL kernel's
// ring step counters with cuda-gdb (common/cuda_gdb/cuda_gdb.h) on real GPUs.
// Enabled with XPU_EVIDENCE_FAKE_NCCL=1 in the daemon's environment.
//
// Thread-safety: reentrant (maps read-only, copies, unmaps).
#ifndef XPU_DAEMON_EVIDENCE_FAKE_NCCL_PROBE_H_
#define XPU_DAEMON_EVIDENCE_FAKE_NCCL_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

bool FakeNcclProbeEnabled();
// Every communicator segment under `shm_dir` (default /dev/shm) in which
// `pid` holds a slot.
std::vector<xpu::v1::IntraKernelProgress> ProbeFakeNccl(int32_t pid,
                                                        const std::string& shm_dir = "/dev/shm");

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_FAKE_NCCL_PROBE_H_
