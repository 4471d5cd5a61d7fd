// slow_link — a slow connection, localized the TFD way → operations.
//
// Bandwidth per point-to-point link (ring send/recv pairs) and per
// communicator (collectives, last-arrival busbw) over the window
// (analysis/collective.h). Then:
//  * links: the links more than min_drop below the median link and beyond
//    median - k·MAD are slow. If one rank touches every slow link, that rank
//    is the slow member; otherwise, the slow links are reported as such.
//  * communicators of one class (op, size, member count): the slow ones
//    (min_drop below the class median); the members common to every slow
//    communicator and absent from the healthy ones are the suspects.
//  * reference: a communicator whose busbw is below its reference while no
//    member can be singled out is a slow ring/communicator. Reference, first
//    available: slow_link.expected_busbw_gbps (drop min_drop); the
//    calibrated busbw of its (op, bytes, ranks, nodes) from `xpu calibrate`
//    (drop calibrated_min_drop: the calibration runs the collective alone);
//    the median busbw of the same shape in previous runs of the job name on
//    the same GPU model (min_drop); its own first windows (min_drop).
// Each diagnosis says whether the slow links are intra-node (same host) or
// inter-node. Collectives under slow_link.min_bytes (latency-bound) are not
// compared; a finding is reported once it held slow_link.persist_windows
// consecutive windows.
#ifndef XPU_ENGINE_DETECTORS_SLOW_LINK_H_
#define XPU_ENGINE_DETECTORS_SLOW_LINK_H_

#include <map>
#include <memory>
#include <string>

#include "engine/detectors/streaks.h"
#include "engine/history/history.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

class SlowLinkDetector : public ViewDetector {
 public:
  // `history` may be null: no calibration and no previous runs.
  SlowLinkDetector(std::shared_ptr<WindowViews> views, std::shared_ptr<const DetectorConfig> config,
                   std::shared_ptr<history::HistoryCache> history = nullptr)
      : ViewDetector(std::move(views), std::move(config)), history_(std::move(history)) {}
  std::string_view name() const override { return "slow_link"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  struct Baseline {
    double busbw = 0;
    int windows = 0;
  };
  std::shared_ptr<history::HistoryCache> history_;
  // job -> communicator key -> baseline busbw
  std::map<std::string, std::map<std::string, Baseline>> baseline_;
  Streaks streaks_;  // per subject: consecutive windows slow (slow_link.persist_windows)
  class WindowPass;  // one window's judgement, step by step (slow_link.cc)
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOW_LINK_H_
