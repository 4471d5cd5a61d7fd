// slowdown_detectors — builds the set of slowdown detectors (one per file in
// this directory) that the engine runs every window on every job, sharing
// one WindowViews and one DetectorConfig.
#ifndef XPU_ENGINE_DETECTORS_SLOWDOWN_DETECTORS_H_
#define XPU_ENGINE_DETECTORS_SLOWDOWN_DETECTORS_H_

#include <memory>
#include <vector>

#include "engine/history/history.h"
#include "engine/window/detector.h"
#include "engine/window/detector_config.h"
#include "engine/window/window_view.h"

namespace xpu::engine {

// Appends the detectors to `out`; returns the shared views so that the
// engine can drop retired jobs from them. `history` (previous runs and
// calibrations, engine/history/) may be null: the detectors then compare a
// job with itself and its peers only.
std::shared_ptr<WindowViews> AddSlowdownDetectors(
    std::shared_ptr<const DetectorConfig> config, std::vector<std::unique_ptr<Detector>>* out,
    std::shared_ptr<history::HistoryCache> history = nullptr);

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_SLOWDOWN_DETECTORS_H_
