// aggregator.h — per-process window statistics per op signature.
//
// Records are assigned to fixed windows aligned to multiples of the window
// length on the record's own clock (start_ns), so windows of different ranks
// line up in the engine. A window is emitted once the newest record seen is
// at least one window length past its end (late records from other streams
// still land), or when forced (process exit). Windows far in the past or the
// future of a hostile clock are bounded: at most kMaxOpenWindows stay open,
// the oldest is emitted when more appear.
//
// Thread-safety: not thread-safe; owned by the collector's drain thread.
#ifndef XPU_DAEMON_AGGREGATOR_H_
#define XPU_DAEMON_AGGREGATOR_H_

#include <cstdint>
#include <map>
#include <vector>

#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::daemon {

class Aggregator {
 public:
  static constexpr size_t kMaxOpenWindows = 16;

  explicit Aggregator(uint64_t window_ns);

  // Adds one validated record. `sig` may be null (unknown shape: no FLOPs or
  // bytes are attributed).
  void Add(const xpu_record_v1& rec, const xpu_signature_v1* sig);

  // Moves completed windows into `out` (oldest first). With `force`, every
  // open window is emitted.
  void TakeCompleted(bool force, std::vector<xpu::v1::WindowSummary>* out);

  size_t open_windows() const { return windows_.size(); }

 private:
  struct Stats {
    uint64_t count = 0;
    uint64_t total_ns = 0;
    uint64_t timed_count = 0;
    uint64_t timed_total_ns = 0;
    uint64_t timed_min_ns = 0;
    uint64_t timed_max_ns = 0;
    double timed_sumsq = 0;
    double flops = 0;
    double bytes = 0;
    uint64_t lat_count = 0;
    int64_t lat_sum = 0;
  };
  using Window = std::map<uint32_t, Stats>;  // by sig_id, ordered for stable output
  static void Emit(uint64_t start, uint64_t window_ns, const Window& w,
                   xpu::v1::WindowSummary* out);

  const uint64_t window_ns_;
  std::map<uint64_t, Window> windows_;  // by window start
  uint64_t newest_start_ns_ = 0;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_AGGREGATOR_H_
