// exposition — the text a /metrics endpoint serves: every family of the
// given collectables (a prometheus::Registry is one), in the Prometheus text
// format 0.0.4.
//
// Thread-safety: as the collectables' Collect().
#ifndef XPU_COMMON_METRICS_EXPOSITION_H_
#define XPU_COMMON_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "prometheus/collectable.h"

namespace xpu::metrics {

std::string Render(const std::vector<const prometheus::Collectable*>& sources);

}  // namespace xpu::metrics

#endif  // XPU_COMMON_METRICS_EXPOSITION_H_
