// baseline_recorder — turns a job's healthy windows into its run baseline
// (history/baselines.h) and hands it to the store after every healthy
// window, so the run's row is current when the job ends (or the engine
// stops) without a separate end-of-job step.
//
// A window is healthy when the detectors reported nothing for the job in it,
// except findings that describe a steady property of the workload rather
// than a fault (void_minority, unoptimized_gemm: they persist from run to
// run and their baseline is the job's normal). Figures per healthy window,
// computed like the detectors compute them (same WindowView):
//   step time: median step of the lowest rank with steps (throughput_regression's
//     reference rank), best = the lowest window median;
//   void %: median over ranks of V_inter and V_minority;
//   GEMM TFLOPS per StableGemmKey: median over ranks (timed, no overlap,
//     >= slow_gpu.min_count per rank);
//   busbw per (op, bytes, nranks, nodes): median over the communicators;
//   issue latency per family: every sample of every rank, in the log histogram.
// The run keeps the last kMaxWindows window medians of each figure and
// stores their median. Jobs without a job name (XPU_JOB_NAME) have no key
// and are not recorded; a run is stored once it has history.baseline_windows
// healthy windows.
// Thread-safety: the window thread (like the detectors), but Measure, which
// reads only the view and the configuration: any thread while the view is
// held and every rank's steps were found (WindowView::FindAll).
#ifndef XPU_ENGINE_HISTORY_BASELINE_RECORDER_H_
#define XPU_ENGINE_HISTORY_BASELINE_RECORDER_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/history/baselines.h"
#include "engine/state/diagnosis.h"
#include "engine/state/job_state.h"
#include "engine/window/detector_config.h"
#include "engine/window/window_view.h"

namespace xpu::engine::history {

class BaselineRecorder {
 public:
  static constexpr size_t kMaxWindows = 64;
  // Receives the run's baseline to store and the number of runs to keep per key.
  using Writer = std::function<void(const RunBaseline& run, int keep_runs)>;

  BaselineRecorder(std::shared_ptr<WindowViews> views, std::shared_ptr<const DetectorConfig> config,
                   Writer writer);

  // After the detectors of the window, with or without job.mu() held: it
  // reads the window's view and job.job() only. `diagnoses`: what they
  // reported for this job in this window. `now_ns` stamps the run.
  void OnWindow(const JobState& job, const std::vector<Diagnosis>& diagnoses, uint64_t now_ns);

  // OnWindow in two parts, so that the figures can be measured beside the
  // detectors (the engine does at detector_parallel_min_ranks ranks and
  // more): Measure reads the window's view and the configuration only
  // (any thread, while the view is held); Take keeps them for the run when
  // the window is healthy (the window thread, after the detectors).
  struct Shape {  // a GEMM signature's or a collective shape's window
    std::string dtype;           // GEMMs: the dtype class
    std::vector<double> values;  // per rank (GEMMs) or per communicator
    uint64_t count = 0;          // calls behind them
  };
  struct WindowFigures {
    bool measured = false;  // the view had ranks and a job name
    std::string job_name, gpu_model;
    double step_median_s = 0;  // of the reference rank
    size_t steps = 0;
    std::vector<double> void_inter, void_minority;  // per rank
    std::map<std::string, LatencyHistogram> issue_latency;
    std::map<std::string, Shape> gemm;  // StableGemmKey ->
    std::map<CollectiveShape, Shape> busbw;
    int min_windows = 1, keep_runs = 0;  // history.baseline_windows, history.runs
  };
  WindowFigures Measure(const JobState& job) const;
  void Take(const JobState& job, WindowFigures figures, const std::vector<Diagnosis>& diagnoses,
            uint64_t now_ns);
  // True when none of `diagnoses` taints a window's figures.
  static bool Healthy(const std::vector<Diagnosis>& diagnoses);
  // The job's run baseline so far; nullopt before its first healthy window.
  std::optional<RunBaseline> Current(const std::string& job) const;
  void Retain(const std::vector<std::string>& jobs);

 private:
  struct Series {
    std::deque<double> values;  // one per healthy window, newest last
    uint64_t count = 0;         // measurements behind them
    void Add(double v, uint64_t n);
    double Median() const;
  };
  struct Run {
    std::string job_name;
    std::string gpu_model;
    uint32_t windows = 0;
    uint64_t steps = 0;
    Series step;
    double step_best = 0;
    Series void_inter, void_minority;
    std::map<std::string, std::pair<std::string, Series>> gemm;  // key -> (dtype, TFLOPS)
    std::map<CollectiveShape, Series> busbw;
    std::map<std::string, LatencyHistogram> issue_latency;
  };
  RunBaseline Snapshot(const std::string& job, const Run& r, uint64_t now_ns) const;

  std::shared_ptr<WindowViews> views_;
  std::shared_ptr<const DetectorConfig> config_;
  Writer writer_;
  std::map<std::string, Run> runs_;  // job id -> run
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_BASELINE_RECORDER_H_
