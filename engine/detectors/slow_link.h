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
//  * history and expectation: a communicator (or every link) whose busbw
//    dropped by min_drop against its own baseline (first windows of the job)
//    or is below slow_link.expected_busbw_gbps × (1 - min_drop) while no
//    member can be singled out is a slow ring/communicator.
// Each diagnosis says whether the slow links are intra-node (same host) or
// inter-node.
#ifndef XPU_ENGINE_DETECTORS_SLOW_LINK_H_
#define XPU_ENGINE_DETECTORS_SLOW_LINK_H_

#include <map>
#include <string>

#include "engine/detectors/window_view.h"

namespace xpu::engine {

class SlowLinkDetector : public ViewDetector {
 public:
  using ViewDetector::ViewDetector;
  std::string_view name() const override { return "slow_link"; }
  void OnWindow(const JobState& job, DiagnosisSink& sink) override;

 private:
  struct Baseline {
    double busbw = 0;
    int windows = 0;
  };
  // job -> communicator key -> baseline busbw
  std::map<std::string, std::map<std::string, Baseline>> baseline_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOW_LINK_H_
