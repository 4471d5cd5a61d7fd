// daemon/evidence/cuda_gdb_probe.cc — see cuda_gdb_probe.h.
#include "daemon/evidence/cuda_gdb_probe.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "engine/hang/cuda_gdb.h"

namespace xpu::daemon {
namespace {

namespace hang = ::xpu::engine::hang;

// Kernel id -> protocol, from the kernel list.
std::map<int, hang::NcclProto> Protocols(const std::vector<hang::CudaKernel>& kernels) {
  std::map<int, hang::NcclProto> out;
  for (const hang::CudaKernel& k : kernels) out[k.id] = k.proto;
  return out;
}

}  // namespace

bool FindPendingCollective(const xpu::v1::HangProgress& progress, PendingCollective* out) {
  bool found = false;
  uint64_t oldest = 0;
  for (const xpu::v1::CommProgress& c : progress.comms()) {
    if (c.pending_seq() == 0) continue;
    if (found && c.pending_since_ns() >= oldest) continue;
    found = true;
    oldest = c.pending_since_ns();
    out->comm_rank = c.comm_rank();
    out->comm_nranks = c.comm_nranks();
    out->pending_seq = c.pending_seq();
    out->completed_seq = c.last_completed_seq();
  }
  return found;
}

std::vector<xpu::v1::IntraKernelProgress> ChannelsToProgress(std::string_view kernel_list,
                                                             std::string_view progress_output,
                                                             const PendingCollective& pending) {
  const std::vector<hang::CudaKernel> kernels = hang::ParseCudaKernels(kernel_list);
  const std::map<int, hang::NcclProto> proto = Protocols(kernels);
  std::map<int, std::string> names;
  for (const hang::CudaKernel& k : kernels) names[k.id] = k.name;
  std::vector<xpu::v1::IntraKernelProgress> out;
  std::map<int, int> grid;
  for (const hang::CudaKernel& k : kernels) grid[k.id] = k.grid_x;
  // Each channel is read twice (two ways of addressing ncclShmem): the
  // readable reading wins, else the first one's errors are kept.
  std::map<std::pair<int, int>, hang::ChannelProgress> best;
  std::vector<std::pair<int, int>> order;
  for (hang::ChannelProgress c : hang::ParseProgress(progress_output)) {
    // Blind reads cover kernel ids and blocks that are not NCCL channels.
    auto g = grid.find(c.kernel);
    if (g == grid.end() || (g->second > 0 && c.channel >= g->second)) continue;
    // Ring neighbours must be other members of the communicator: anything
    // else means the reads did not hit ncclShmem (e.g. zeros from a wrong
    // address), and the counters next to them mean nothing either.
    const int32_t n = pending.comm_nranks;
    const auto member = [&](int r) { return r >= 0 && (n <= 0 || r < n) && (n <= 1 || r != pending.comm_rank); };
    if (c.ok && pending.comm_rank >= 0 && !(member(c.ring_prev) && member(c.ring_next))) {
      c.ok = false;
      c.error = absl::StrCat("implausible ring neighbours (prev ", c.ring_prev, ", next ", c.ring_next, " for rank ",
                             pending.comm_rank, " of ", n, "): the reads did not reach ncclShmem",
                             c.error.empty() ? "" : "; ", c.error);
    }
    auto [it, fresh] = best.try_emplace({c.kernel, c.channel}, c);
    if (fresh) {
      order.push_back(it->first);
    } else if (!it->second.ok && c.ok) {
      it->second = c;
    }
  }
  for (const auto& key : order) {
    const hang::ChannelProgress& c = best.at(key);
    const auto p = proto.at(c.kernel);
    xpu::v1::IntraKernelProgress k;
    k.set_source(absl::StrCat("cuda-gdb ", hang::NcclProtoName(p)));
    k.set_channel(absl::StrCat("ch", c.channel));
    k.set_comm_rank(pending.comm_rank);
    k.set_comm_nranks(pending.comm_nranks);
    k.set_arrived_seq(pending.pending_seq);
    k.set_completed_seq(pending.completed_seq);
    k.set_ring_prev(c.ok ? c.ring_prev : -1);
    k.set_ring_next(c.ok ? c.ring_next : -1);
    k.set_step(c.ok ? c.Progress(p) : 0);
    if (c.ok) {
      k.set_detail(absl::StrCat(names[c.kernel], " block ", c.channel, ": ring ", c.ring_prev, "->self->",
                                c.ring_next, ", recv step ", c.recv_step, " tail ", c.recv_tail, ", send step ",
                                c.send_step, " head ", c.send_head,
                                p == hang::NcclProto::kSimple ? "" : absl::StrCat(", ll flag ", c.ll_flag),
                                c.error.empty() ? "" : absl::StrCat(" (cuda-gdb also said: ", c.error, ")")));
    } else {
      k.set_detail(absl::StrCat(names[c.kernel], " block ", c.channel, ": not readable: ",
                                c.error.empty() ? "no output" : c.error));
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace xpu::daemon
