// tools/sim/evidence.h — what a simulated daemon answers to the engine's
// commands, consistent with the model's state (and so with the injected
// fault):
//   evidence  per process: process state (a stopped rank is "stopped"), gdb
//             and faulthandler stacks (a rank waiting in the stuck collective
//             is inside ncclAllReduce, a rank stuck in Python is in a Python
//             function of the data path), the hook's hang-watch table, and,
//             for a collective that hangs inside the kernel, the ring step
//             counters of every member (the rank after the stalled link
//             received nothing);
//   history   the process's records of the latest window (a daemon's ring),
//             honouring ranks and last_n;
//   profile   "unsupported" per process: the simulator models no CUPTI
//             window (a hook without windows answers the same).
// Unknown kinds are refused as the daemon refuses them.
//
// Thread-safety: pure functions over a model that is not being mutated.
#ifndef XPU_TOOLS_SIM_EVIDENCE_H_
#define XPU_TOOLS_SIM_EVIDENCE_H_

#include <cstdint>
#include <vector>

#include "tools/sim/cluster_model.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::sim {

xpu::v1::ProcessEvidence MakeEvidence(const ClusterModel& m, int32_t rank, uint64_t now_ns,
                                      uint64_t hang_floor_ns);

// The reply to `cmd` from the daemon of `host` (ranks of that host only).
xpu::v1::CommandReply AnswerCommand(const ClusterModel& m, int32_t host,
                                    const xpu::v1::Command& cmd, uint64_t now_ns,
                                    uint64_t hang_floor_ns);

}  // namespace xpu::sim

#endif  // XPU_TOOLS_SIM_EVIDENCE_H_
