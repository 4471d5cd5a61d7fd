// baselines — what the engine remembers across runs, keyed by (job name,
// GPU model): a job's figures in its healthy windows (RunBaseline, one per
// run), the previous runs combined robustly (HistoryBaseline), and what
// `xpu calibrate` measured on a GPU model (Calibration).
//
// Job name = XPU_JOB_NAME, which is also the "backbone" of per-backbone
// thresholds (detector_config.h), so (job name, GPU model) is the
// (job name, GPU model, backbone) key. Signatures are compared across runs by
// a key that does not depend on the process-local sig_id (StableGemmKey);
// collectives by (op, nccl-tests bytes, communicator size, hosts spanned).
//
// Robustness: a run stores the median over its healthy windows of each
// figure; the history of a key is the median over its last
// `history.runs` runs (the best step time: the minimum), so one odd run
// neither makes nor breaks a baseline.
// Thread-safety: value types and pure functions.
#ifndef XPU_ENGINE_HISTORY_BASELINES_H_
#define XPU_ENGINE_HISTORY_BASELINES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/analysis/trace.h"
#include "engine/history/latency_histogram.h"

namespace xpu::engine::history {

// Comparable collectives across runs and against calibration.
struct CollectiveShape {
  std::string op;      // OpKindName: allreduce, allgather, ...
  uint64_t bytes = 0;  // nccl-tests size of one instance
  int32_t nranks = 0;
  int32_t nodes = 0;  // hosts the communicator spans
  bool operator<(const CollectiveShape& o) const {
    return std::tie(op, bytes, nranks, nodes) < std::tie(o.op, o.bytes, o.nranks, o.nodes);
  }
  bool operator==(const CollectiveShape& o) const {
    return std::tie(op, bytes, nranks, nodes) == std::tie(o.op, o.bytes, o.nranks, o.nodes);
  }
  // "allreduce of 64 MiB, 8 ranks on 1 node"
  std::string Describe() const;
};

struct GemmFigure {
  std::string dtype;  // GemmDtypeClass
  double tflops = 0;
  uint64_t count = 0;  // GEMMs measured
};
struct BusBwFigure {
  double busbw = 0;  // bytes/s
  uint64_t count = 0;
};

// Issue-latency families, as analysis::KernelFamily names.
inline constexpr char kFamilyCompute[] = "compute";
inline constexpr char kFamilyCommunication[] = "communication";

// One run (job id) of a job name on a GPU model: medians over its healthy
// windows. Zero / negative values mean "not measured".
struct RunBaseline {
  std::string job_name;
  std::string gpu_model;
  std::string job;
  uint64_t updated_ns = 0;
  uint32_t windows = 0;  // healthy windows that contributed
  uint64_t steps = 0;
  double step_median_s = 0;
  double step_best_s = 0;
  double void_inter = -1;
  double void_minority = -1;
  std::map<std::string, GemmFigure> gemm;  // StableGemmKey -> figure
  std::map<CollectiveShape, BusBwFigure> busbw;
  std::map<std::string, LatencyHistogram> issue_latency;  // family -> histogram
};

struct HistoryFigure {
  double value = 0;
  int runs = 0;  // runs that had the figure
  bool known() const { return runs > 0; }
};

// The previous runs of one key combined.
struct HistoryBaseline {
  std::string job_name;
  std::string gpu_model;
  int runs = 0;
  HistoryFigure step_median_s;  // median of the runs' medians
  HistoryFigure step_best_s;    // best of the runs' bests
  HistoryFigure void_inter;
  HistoryFigure void_minority;
  std::map<std::string, HistoryFigure> gemm_tflops;  // StableGemmKey
  std::map<CollectiveShape, HistoryFigure> busbw;
  std::map<std::string, LatencyHistogram> issue_latency;  // summed over runs
  std::map<std::string, int> issue_latency_runs;
  bool empty() const { return runs == 0; }
  // "3 previous runs of job 'gpt-pretrain' on NVIDIA H200" (runs = the
  // figure's own count).
  std::string Describe(int figure_runs) const;
};
HistoryBaseline CombineRuns(const std::vector<RunBaseline>& runs);

struct GemmCalibrationRow {
  std::string gpu_model;
  std::string host;
  std::string dtype;      // bf16, fp16, tf32, fp32, fp8
  double tflops = 0;      // best device
  double tflops_min = 0;  // slowest device
  uint32_t m = 0, n = 0, k = 0;
  uint32_t devices = 0;
  uint64_t measured_ns = 0;
};
struct CollectiveCalibrationRow {
  std::string gpu_model;
  std::string host;
  CollectiveShape shape;
  double time_us = 0;
  double algbw = 0;  // bytes/s
  double busbw = 0;  // bytes/s
  uint64_t measured_ns = 0;
};
struct CalibrationRows {
  std::vector<GemmCalibrationRow> gemm;
  std::vector<CollectiveCalibrationRow> collectives;
};

// Calibration of one GPU model; where several hosts calibrated, the best
// value per entry (a peak is what the hardware can do).
struct Calibration {
  std::string gpu_model;
  std::map<std::string, GemmCalibrationRow> gemm;  // dtype -> best row
  std::vector<CollectiveCalibrationRow> collectives;
  bool empty() const { return gemm.empty() && collectives.empty(); }
  const GemmCalibrationRow* Gemm(const std::string& dtype) const;
  // Expected busbw of `s`: the calibrated points with the same op, ranks and
  // nodes, log-log interpolated between the two sizes around s.bytes (exact
  // size: that point). nullopt outside the calibrated size range: bandwidth
  // depends too much on size to extrapolate. `how` describes the source.
  std::optional<double> BusBw(const CollectiveShape& s, std::string* how = nullptr) const;
};
Calibration CombineCalibration(const std::string& gpu_model, const CalibrationRows& rows);

// Identity of a GEMM across runs: dtype, dimensions, batch and transposes,
// e.g. "gemm bf16 m=4096 n=4096 k=4096 b=1 NT". Not the API name: the same
// math through cuBLAS or cuBLASLt is the same baseline.
std::string StableGemmKey(const analysis::OpSig& s);
// Calibration dtype of a GEMM's input dtype: bf16, fp16, fp32, fp8; "" when
// `xpu calibrate` does not measure it. fp32 GEMMs compare with the fp32 (not
// TF32) peak: the signature cannot tell whether TF32 was allowed, and the
// lower peak never makes a TF32 GEMM look slow.
std::string GemmDtypeClass(uint8_t dtype);
// "64 MiB", "1.5 GiB", "512 KiB", "100 B"
std::string Bytes(uint64_t b);

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_BASELINES_H_
