// daemon/evidence/cuda_gdb_probe.cc — see cuda_gdb_probe.h.
#include "daemon/evidence/cuda_gdb_probe.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "common/cuda_gdb/cuda_gdb.h"

namespace xpu::daemon {
namespace {

constexpr int kMaxNcclChannels = 64;  // MAXCHANNELS in NCCL 2.28

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
  const std::vector<cuda_gdb::CudaKernel> kernels = cuda_gdb::ParseCudaKernels(kernel_list);
  std::map<int, std::string> names;
  std::map<int, int> grid;
  for (const cuda_gdb::CudaKernel& k : kernels) {
    names[k.id] = k.name;
    grid[k.id] = k.grid_x;
  }
  // ncclShmem's place in the shared window depends on the SM version; with
  // the version known, readings at the other place are dropped.
  const int base = cuda_gdb::SharedBaseForSm(cuda_gdb::ParseSmVersion(kernel_list));
  // Each block is read at every candidate base: the plausible reading wins,
  // else the first one's errors are kept.
  std::map<std::pair<int, int>, cuda_gdb::ChannelProgress> best;
  std::vector<std::pair<int, int>> order;
  for (cuda_gdb::ChannelProgress c : cuda_gdb::ParseProgress(progress_output)) {
    // Blind reads cover kernel ids and blocks that are not NCCL channels.
    auto g = grid.find(c.kernel);
    if (g == grid.end() || (g->second > 0 && c.block >= g->second)) continue;
    if (base >= 0 && c.base >= 0 && c.base != base) continue;
    // Ring neighbours must be other members of the communicator, distinct
    // unless there are two, and the channel id a channel's: anything else
    // means the reads did not hit ncclShmem (e.g. zeros from a wrong
    // address), and the counters next to them mean nothing either.
    const int32_t n = pending.comm_nranks;
    const auto member = [&](int r) {
      return r >= 0 && (n <= 0 || r < n) && (n <= 1 || r != pending.comm_rank);
    };
    if (c.ok && pending.comm_rank >= 0 &&
        !(member(c.ring_prev) && member(c.ring_next) && (n <= 2 || c.ring_prev != c.ring_next) &&
          c.channel_id >= 0 && c.channel_id < kMaxNcclChannels)) {
      c.ok = false;
      c.error = absl::StrCat("implausible ring (prev ", c.ring_prev, ", next ", c.ring_next,
                             ", channel ", c.channel_id, " for rank ", pending.comm_rank, " of ", n,
                             "): the reads did not reach ncclShmem", c.error.empty() ? "" : "; ",
                             c.error);
    }
    auto [it, fresh] = best.try_emplace({c.kernel, c.block}, c);
    if (fresh) {
      order.push_back(it->first);
    } else if (!it->second.ok && c.ok) {
      it->second = c;
    }
  }
  std::vector<xpu::v1::IntraKernelProgress> out;
  for (const auto& key : order) {
    const cuda_gdb::ChannelProgress& c = best.at(key);
    xpu::v1::IntraKernelProgress k;
    // One source for every channel: the protocol is read from the counters
    // per channel (the kernel name gives the specialization only).
    k.set_source("cuda-gdb");
    // The ring channel (same id on every rank), else the block.
    k.set_channel(absl::StrCat("ch", c.ok ? c.channel_id : c.block));
    k.set_comm_rank(pending.comm_rank);
    k.set_comm_nranks(pending.comm_nranks);
    k.set_arrived_seq(pending.pending_seq);
    k.set_completed_seq(pending.completed_seq);
    k.set_ring_prev(c.ok ? c.ring_prev : -1);
    k.set_ring_next(c.ok ? c.ring_next : -1);
    cuda_gdb::NcclProto moved = cuda_gdb::NcclProto::kUnknown;
    k.set_step(c.ok ? c.Delivered(&moved) : 0);
    k.set_sent(c.ok ? c.Consumed() : 0);
    if (c.ok) {
      std::string ll, ll128;
      for (int s = 0; s < cuda_gdb::kNcclSteps; ++s) {
        absl::StrAppend(&ll, s ? "," : "", c.ll_flags[s]);
        absl::StrAppend(&ll128, s ? "," : "", c.ll128_flags[s]);
      }
      k.set_detail(absl::StrCat(
          names[c.kernel], " block ", c.block, " channel ", c.channel_id, " (ncclShmem at ", c.base,
          "): ring ", c.ring_prev, "->self->", c.ring_next, ", received ", k.step(),
          " step(s) in this kernel",
          moved == cuda_gdb::NcclProto::kUnknown
              ? ""
              : absl::StrCat(" (", cuda_gdb::NcclProtoName(moved), " counters)"),
          ", successor consumed ", k.sent(), "; recv step ", c.recv_step, " tail ", c.recv_tail,
          ", send step ", c.send_step, " head ", c.send_head, ", LL slot flags ", ll,
          ", LL128 slot flags ", ll128,
          c.error.empty() ? "" : absl::StrCat(" (cuda-gdb also said: ", c.error, ")")));
    } else {
      k.set_detail(absl::StrCat(names[c.kernel], " block ", c.block,
                                ": not readable: ", c.error.empty() ? "no output" : c.error));
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace xpu::daemon
