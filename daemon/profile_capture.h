// profile_capture.h — the records of one process while a profiling window
// runs (profile_window.h). The collector's drain appends every record it
// reads from the process's ring while a capture is attached; the profile
// runner takes the records out when the hook reported the window's end and
// the drain has caught up with it.
//
// Thread-safety: none; guarded by the collector's lock, like ProcessState.
#ifndef XPU_DAEMON_PROFILE_CAPTURE_H_
#define XPU_DAEMON_PROFILE_CAPTURE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xpu/record.h"

namespace xpu::daemon {

struct ProfileCapture {
  explicit ProfileCapture(size_t max) : max_records(max) {}
  void Add(const xpu_record_v1& rec) {
    if (rec.flags & XPU_REC_PROFILE_WINDOW) ++window_records;
    if (records.size() >= max_records) {
      ++dropped;  // bounded memory: a window never grows the daemon past its cap
      return;
    }
    records.push_back(rec);
  }

  const size_t max_records;
  std::vector<xpu_record_v1> records;
  uint64_t dropped = 0;         // over max_records
  uint64_t window_records = 0;  // XPU_REC_PROFILE_WINDOW records seen (kept or not)
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_PROFILE_CAPTURE_H_
