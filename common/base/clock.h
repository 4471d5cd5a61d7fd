// common/base/clock.h — the two clocks our processes read, in nanoseconds.
//
// RealtimeNs is the host clock records are stamped with (record.h: start_ns
// is CLOCK_REALTIME); MonotonicNs is for deadlines and intervals.
// Thread-safety: thread-safe (clock_gettime).
#ifndef XPU_COMMON_BASE_CLOCK_H_
#define XPU_COMMON_BASE_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace xpu {

inline uint64_t ClockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t RealtimeNs() { return ClockNs(CLOCK_REALTIME); }
inline uint64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

}  // namespace xpu

#endif  // XPU_COMMON_BASE_CLOCK_H_
