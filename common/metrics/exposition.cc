#include "common/metrics/exposition.h"

#include "prometheus/text_serializer.h"

namespace xpu::metrics {

std::string Render(const std::vector<const prometheus::Collectable*>& sources) {
  std::vector<prometheus::MetricFamily> all;
  for (const prometheus::Collectable* c : sources) {
    std::vector<prometheus::MetricFamily> f = c->Collect();
    all.insert(all.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
  }
  prometheus::TextSerializer s;
  return s.Serialize(all);
}

}  // namespace xpu::metrics
