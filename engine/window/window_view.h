// engine/window/window_view.h — the records of one job's latest window as
// analysis input: per rank, the records that arrived since the previous
// window (cursor on each rank's record ring) plus the rank's signatures,
// converted to the gRPC-free analysis::RankTrace (common/analysis/trace.h).
//
// WindowViews is shared by the slowdown detectors of one engine so that the
// view of a window is built once, by the first detector that asks for it.
// Thread-safety: built and released on the window thread under the job's
// lock (the engine runs detectors one job at a time). A built view is a
// copy: the detectors read it without the job's lock, beside the ingest
// that fills the job's rings with the next window's records.
#ifndef XPU_ENGINE_WINDOW_WINDOW_VIEW_H_
#define XPU_ENGINE_WINDOW_WINDOW_VIEW_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/analysis/collective.h"
#include "common/analysis/gemm.h"
#include "common/analysis/steps.h"
#include "common/analysis/trace.h"
#include "common/analysis/void_time.h"
#include "engine/state/diagnosis.h"
#include "engine/state/job_state.h"
#include "engine/window/detector.h"
#include "engine/window/detector_config.h"

namespace xpu::engine {

struct WindowView {
  uint64_t window_id = 0;                  // JobState::window_start_ns() when built
  std::vector<analysis::RankTrace> ranks;  // ranked processes with new records, by rank
  uint64_t records = 0;
  uint64_t first_ns = 0, last_ns = 0;  // host-clock span of the records
  std::string backbone;                // job_name, for per-backbone thresholds
  std::string gpu_model;               // JobState::GpuModel() when built
  std::string HostOf(int32_t rank) const;
  // The identity of a rank of `ranks` as its process reported it (labels of
  // its figures); an empty one for another rank.
  const xpu::v1::ProcessIdentity& IdentityOf(int32_t rank) const;
  std::unordered_map<int32_t, xpu::v1::ProcessIdentity> identities;  // of `ranks`, by rank
  // Per-rank figures that several detectors read, found once per window
  // for all of them (each was found by up to five of them at 100k ranks):
  // the steps of `t`, an element of `ranks` (analysis::FindSteps); its void
  // figures over those steps (analysis::ComputeVoid); its GEMM figures per
  // shape (analysis::GemmTflops, with each call's concurrency and issue
  // latency marked). For a trace that is not one of `ranks`, found anew
  // into a per-thread scratch copy.
  // Thread-safe once FindAll ran.
  const analysis::Steps& StepsOf(const analysis::RankTrace& t) const;
  const analysis::VoidFigures& VoidOf(const analysis::RankTrace& t) const;
  const std::map<std::string, analysis::GemmStat>& GemmsOf(const analysis::RankTrace& t) const;
  // The window's communicators with their last-arrival bandwidth
  // (analysis::CommunicatorBandwidth over every rank), found once for the
  // slow-link detector, the figures exporter and the baseline recorder
  // (each grouped every rank's collectives anew, at once: under tp8pp4 the
  // three groupings were a quarter of the engine's memory in a tick; the
  // one left folds each instance as the ranks are read).
  // Thread-safe once FindAll ran.
  const std::vector<analysis::CommBandwidth>& Communicators() const;
  // Finds every rank's figures and the communicators now, on up to
  // `threads` threads (the communicators on one more), so that the
  // accessors above only read (detectors then run concurrently).
  void FindAll(int threads) const;

 private:
  struct RankFigures {
    std::optional<analysis::Steps> steps;
    std::optional<analysis::VoidFigures> voids;
    std::optional<std::map<std::string, analysis::GemmStat>> gemms;
  };
  // The figure `member` of `t`, found by find() when first asked; for a
  // trace that is not one of `ranks`, found anew into a per-thread copy.
  template <typename T, typename Find>
  const T& Cached(const analysis::RankTrace& t, std::optional<T> RankFigures::*member,
                  Find find) const;
  mutable std::vector<RankFigures> figures_;  // by index in ranks
  mutable std::optional<std::vector<analysis::CommBandwidth>> comms_;
};

// Runs part(from, to) over [0, n) in up to `threads` parts of at least
// `per_part` items each (one part when n is smaller), the first on this
// thread: a window's per-rank work at 100k ranks.
template <typename Part>
void InParts(size_t n, int threads, size_t per_part, const Part& part) {
  const size_t t = std::clamp<size_t>(n / std::max<size_t>(1, per_part), 1,
                                      static_cast<size_t>(std::max(1, threads)));
  std::vector<std::thread> pool;
  for (size_t k = 1; k < t; ++k) pool.emplace_back(part, n * k / t, n * (k + 1) / t);
  part(0, n / t);
  for (std::thread& th : pool) th.join();
}

// Where a window ends for its view (the window tick, some seconds after the
// end): a rank's records from the first that started at or after end_ns
// wait in its ring for the next window. One that started at or after
// next_ns (a clock that far ahead) does not stop the window. The default
// takes every record received.
struct WindowCut {
  uint64_t end_ns = UINT64_MAX;
  uint64_t next_ns = UINT64_MAX;
};

class WindowViews {
 public:
  // The view of the window that `job` just closed.
  const WindowView& Get(const JobState& job);
  // The same view, built before the detectors run by the one that owns the
  // job (the window tick): each process's ring is trimmed to its tail
  // (JobState::TrimRings's `keep`, `pace_keep` for the pace process) as
  // soon as its window records are copied, so that the rings' window
  // records and the decoded view do not coexist. Get then returns it.
  // Built on up to `threads` threads (a part per 1,024+ ranks), of the
  // records before `cut` (the ring keeps those after it as well).
  const WindowView& BuildAndTrim(JobState& job, size_t keep = kRingTailRecords,
                                 size_t pace_keep = kPaceTailRecords, int threads = 1,
                                 WindowCut cut = {});
  // Frees the job's view once the window's analyses are done (the cursors
  // stay): the records of a window are not held until the next one.
  void Release(const std::string& job);
  // Forgets jobs the engine no longer has.
  void Retain(const std::vector<std::string>& jobs);

 private:
  struct PerJob {
    std::map<std::string, uint64_t> cursor;  // process key -> ring.written()
    WindowView view;
    bool built = false;
  };
  // Builds the view of `job` unless built; calls trim(p, held) for every
  // process once its records before `cut` are in the view (trim may be
  // empty; `held`: its newest records left for the next window), on up to
  // `threads` threads.
  using Trim = std::function<void(ProcessState&, size_t held)>;
  const WindowView& Make(const JobState& job, const Trim& trim, int threads, WindowCut cut);
  std::map<std::string, PerJob> jobs_;
};

// Base of the slowdown detectors: the shared views and the thresholds.
class ViewDetector : public Detector {
 public:
  ViewDetector(std::shared_ptr<WindowViews> views, std::shared_ptr<const DetectorConfig> config)
      : views_(std::move(views)), config_(std::move(config)) {}
  // The view is built (and its steps found) before the detectors run.
  bool ReadsOnlyTheView() const override { return true; }

 protected:
  double Param(const WindowView& v, std::string_view key) const {
    return config_->Get(key, v.backbone);
  }
  std::shared_ptr<WindowViews> views_;
  std::shared_ptr<const DetectorConfig> config_;
};

// A diagnosis pre-filled with the job, kind, team and window time.
Diagnosis NewDiagnosis(const JobState& job, std::string kind, Team team);
// Sorted unique hosts of `ranks` in the view.
std::vector<std::string> HostsOf(const WindowView& v, const std::vector<int32_t>& ranks);
// "1.23" style figures for evidence text.
std::string Fmt(double v, int digits = 2);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_WINDOW_WINDOW_VIEW_H_
