#include "engine/detectors/slowdown_detectors.h"

#include "engine/detectors/extra_gpu_work.h"
#include "engine/detectors/kernel_issue_stall.h"
#include "engine/detectors/slow_dataloader.h"
#include "engine/detectors/slow_gpu.h"
#include "engine/detectors/slow_link.h"
#include "engine/detectors/throughput_regression.h"
#include "engine/detectors/unoptimized_gemm.h"
#include "engine/detectors/void_inter.h"
#include "engine/detectors/void_minority.h"

namespace xpu::engine {

std::shared_ptr<WindowViews> AddSlowdownDetectors(std::shared_ptr<const DetectorConfig> config,
                                                  std::vector<std::unique_ptr<Detector>>* out,
                                                  std::shared_ptr<history::HistoryCache> history) {
  auto views = std::make_shared<WindowViews>();
  out->push_back(std::make_unique<ThroughputRegressionDetector>(views, config, history));
  out->push_back(std::make_unique<SlowGpuDetector>(views, config));
  out->push_back(std::make_unique<UnoptimizedGemmDetector>(views, config, history));
  out->push_back(std::make_unique<SlowLinkDetector>(views, config, history));
  out->push_back(std::make_unique<KernelIssueStallDetector>(views, config, history));
  out->push_back(std::make_unique<SlowDataloaderDetector>(views, config));
  out->push_back(std::make_unique<VoidInterDetector>(views, config, history));
  out->push_back(std::make_unique<VoidMinorityDetector>(views, config, history));
  out->push_back(std::make_unique<ExtraGpuWorkDetector>(views, config));
  return views;
}

}  // namespace xpu::engine
