// nccl_bench — collective bus bandwidth across the local GPUs, the
// nccl-tests way, in one process: ncclCommInitAll over `devices` GPUs, one
// stream per GPU, every call of one iteration in one ncclGroupStart/End.
// Per (op, size): `warmup` untimed iterations, then `iters` iterations timed
// on the host clock between two synchronizations of every stream:
//     time = elapsed / iters,  algbw = bytes / time,
//     busbw = algbw · factor    (include/xpu/formulas.h: all-reduce
//                                2(n−1)/n, all-gather and reduce-scatter (n−1)/n)
// with `bytes` the nccl-tests size (all-gather: the gathered total,
// reduce-scatter: the scattered input), rounded down to a multiple of
// n · element size. Data is BF16; buffers are zeroed once.
// Thread-safety: not reentrant (one calibration at a time).
#ifndef XPU_TOOLS_CALIBRATE_NCCL_BENCH_H_
#define XPU_TOOLS_CALIBRATE_NCCL_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/calibrate/cuda_libs.h"

namespace xpu::calibrate {

struct CollectiveResult {
  std::string op;  // allreduce, allgather, reducescatter
  uint64_t bytes = 0;
  int nranks = 0;
  double time_us = 0;
  double algbw = 0;  // bytes/s
  double busbw = 0;  // bytes/s
  int iters = 0;
};

bool KnownCollective(const std::string& op);

// Runs every (op, size); `progress` is called after each one.
absl::StatusOr<std::vector<CollectiveResult>> MeasureCollectives(
    const CudaLibs& libs, int devices, const std::vector<std::string>& ops,
    const std::vector<uint64_t>& sizes, int warmup, int iters,
    const std::function<void(const CollectiveResult&)>& progress);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_NCCL_BENCH_H_
