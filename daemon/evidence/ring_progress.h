// daemon/evidence/ring_progress.h — reads the hook's hang-watch progress
// table (include/xpu/ring.h, xpu_ring_progress_v1) out of a ring header page.
//
// The page is shared memory written by another process: the reader copies
// it, validates every field and accepts an entry only when its sequence word
// is even and two consecutive copies agree (ring.h protocol). A table the
// hook never initialised (magic 0) yields "no progress", not an error.
//
// Thread-safety: pure functions.
#ifndef XPU_DAEMON_EVIDENCE_RING_PROGRESS_H_
#define XPU_DAEMON_EVIDENCE_RING_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "xpu/v1/common.pb.h"

namespace xpu::ring {
class RingReader;
}  // namespace xpu::ring

namespace xpu::daemon {

// Parses two copies of the header page (each `n` bytes, n >= the end of the
// progress table) into `out`. `name_of` resolves a sig_id to its name (may be
// empty). Returns false when there is no valid table.
bool ParseProgress(const uint8_t* copy1, const uint8_t* copy2, size_t n,
                   const std::function<std::string(uint32_t)>& name_of, xpu::v1::HangProgress* out);

// Reads the table of a live ring (two guarded copies) into `out`.
bool ReadProgress(const ring::RingReader& reader, xpu::v1::HangProgress* out);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_EVIDENCE_RING_PROGRESS_H_
