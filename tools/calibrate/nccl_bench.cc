#include "tools/calibrate/nccl_bench.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "xpu/formulas.h"

namespace xpu::calibrate {
namespace {

constexpr size_t kElement = 2;  // BF16

uint32_t KindOf(const std::string& op) {
  if (op == "allreduce") return XPU_OP_ALLREDUCE;
  if (op == "allgather") return XPU_OP_ALLGATHER;
  if (op == "reducescatter") return XPU_OP_REDUCESCATTER;
  return XPU_OP_NONE;
}

// Communicators, streams and buffers of every device, released on every path.
struct Ring {
  explicit Ring(const CudaLibs& l) : l(l) {}
  ~Ring() {
    for (size_t d = 0; d < streams.size(); ++d) {
      if (streams[d] != nullptr) {
        l.set_device(static_cast<int>(d));
        l.stream_synchronize(streams[d]);
      }
    }
    for (ncclComm_t c : comms) {
      if (c != nullptr) l.nccl_comm_destroy(c);
    }
    for (size_t d = 0; d < streams.size(); ++d) {
      l.set_device(static_cast<int>(d));
      if (send[d] != nullptr) l.free(send[d]);
      if (recv[d] != nullptr) l.free(recv[d]);
      if (streams[d] != nullptr) l.stream_destroy(streams[d]);
    }
  }
  const CudaLibs& l;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> send, recv;
};

absl::Status Nccl(const CudaLibs& l, ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": NCCL error ", static_cast<int>(r),
                                          l.nccl_error_string ? ": " : "",
                                          l.nccl_error_string ? l.nccl_error_string(r) : ""));
}

}  // namespace

bool KnownCollective(const std::string& op) { return KindOf(op) != XPU_OP_NONE; }

absl::StatusOr<std::vector<CollectiveResult>> MeasureCollectives(
    const CudaLibs& l, int devices, const std::vector<std::string>& ops,
    const std::vector<uint64_t>& sizes, int warmup, int iters,
    const std::function<void(const CollectiveResult&)>& progress) {
  if (!l.has_nccl()) return absl::NotFoundError("libnccl.so.2 is not loaded");
  if (devices < 2) return absl::FailedPreconditionError("collectives need at least 2 GPUs");
  if (sizes.empty() || iters < 1) return absl::InvalidArgumentError("no sizes or no iterations");
  const uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  Ring ring(l);
  ring.comms.assign(devices, nullptr);
  ring.streams.assign(devices, nullptr);
  ring.send.assign(devices, nullptr);
  ring.recv.assign(devices, nullptr);
  for (int d = 0; d < devices; ++d) {
    cudaError_t e = l.set_device(d);
    if (e == cudaSuccess) e = l.stream_create(&ring.streams[d]);
    if (e == cudaSuccess) e = l.malloc(&ring.send[d], max_bytes);
    if (e == cudaSuccess) e = l.malloc(&ring.recv[d], max_bytes);
    if (e == cudaSuccess) e = l.memset(ring.send[d], 0, max_bytes);
    if (e == cudaSuccess) e = l.memset(ring.recv[d], 0, max_bytes);
    if (e != cudaSuccess) {
      return absl::ResourceExhaustedError(
          absl::StrCat("device ", d, ": 2 buffers of ", max_bytes, " bytes: ", l.CudaError(e)));
    }
  }
  std::vector<int> devlist(devices);
  for (int d = 0; d < devices; ++d) devlist[d] = d;
  if (absl::Status st = Nccl(l, l.nccl_comm_init_all(ring.comms.data(), devices, devlist.data()),
                             "ncclCommInitAll");
      !st.ok()) {
    std::fill(ring.comms.begin(), ring.comms.end(), nullptr);
    return st;
  }
  auto sync_all = [&]() -> absl::Status {
    for (int d = 0; d < devices; ++d) {
      cudaError_t e = l.set_device(d);
      if (e == cudaSuccess) e = l.stream_synchronize(ring.streams[d]);
      if (e != cudaSuccess)
        return absl::InternalError(absl::StrCat("device ", d, ": ", l.CudaError(e)));
    }
    return absl::OkStatus();
  };
  std::vector<CollectiveResult> out;
  const uint64_t n = static_cast<uint64_t>(devices);
  for (const std::string& op : ops) {
    const uint32_t kind = KindOf(op);
    if (kind == XPU_OP_NONE)
      return absl::InvalidArgumentError(absl::StrCat("unknown collective ", op));
    for (uint64_t requested : sizes) {
      const uint64_t bytes = requested / (n * kElement) * (n * kElement);
      if (bytes == 0) continue;
      const size_t count = bytes / kElement;  // all-reduce elements
      const size_t part = count / n;          // per-rank share for all-gather / reduce-scatter
      auto one = [&]() -> absl::Status {
        XPU_RETURN_IF_ERROR(Nccl(l, l.nccl_group_start(), "ncclGroupStart"));
        ncclResult_t r = ncclSuccess;
        for (int d = 0; d < devices && r == ncclSuccess; ++d) {
          if (kind == XPU_OP_ALLREDUCE) {
            r = l.nccl_all_reduce(ring.send[d], ring.recv[d], count, ncclBfloat16, ncclSum,
                                  ring.comms[d], ring.streams[d]);
          } else if (kind == XPU_OP_ALLGATHER) {
            r = l.nccl_all_gather(ring.send[d], ring.recv[d], part, ncclBfloat16, ring.comms[d],
                                  ring.streams[d]);
          } else {
            r = l.nccl_reduce_scatter(ring.send[d], ring.recv[d], part, ncclBfloat16, ncclSum,
                                      ring.comms[d], ring.streams[d]);
          }
        }
        ncclResult_t end = l.nccl_group_end();
        if (r != ncclSuccess) return Nccl(l, r, op.c_str());
        return Nccl(l, end, "ncclGroupEnd");
      };
      for (int i = 0; i < warmup; ++i) {
        XPU_RETURN_IF_ERROR(one());
      }
      XPU_RETURN_IF_ERROR(sync_all());
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        XPU_RETURN_IF_ERROR(one());
      }
      XPU_RETURN_IF_ERROR(sync_all());
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      if (!(s > 0)) continue;
      CollectiveResult r;
      r.op = op;
      r.bytes = bytes;
      r.nranks = devices;
      r.time_us = s * 1e6;
      r.algbw = static_cast<double>(bytes) / s;
      r.busbw = r.algbw * xpu_busbw_factor(kind, devices);
      r.iters = iters;
      if (progress) progress(r);
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace xpu::calibrate
