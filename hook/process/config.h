// hook/process/config.h — every XPU_* environment variable the hook reads.
//
// Read once in the library constructor (LoadConfig) and never re-read: the
// launch path only looks at the resulting plain values. Parsing is defensive:
// a malformed or out-of-range value falls back to the default, it never
// aborts the host process.
// Thread-safety: a Config is immutable after LoadConfig returns.
#ifndef XPU_HOOK_PROCESS_CONFIG_H_
#define XPU_HOOK_PROCESS_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "xpu/ring.h"

namespace xpu::hook {

// Matches xpu_ring_header_v1.timing_policy.
enum class TimingPolicy : uint32_t { kSampled = 0, kAll = 1, kOff = 2 };

struct Config {
  bool enable = true;                                  // XPU_ENABLE
  TimingPolicy timing = TimingPolicy::kSampled;        // XPU_TIMING
  uint32_t sample_first = 32;                          // XPU_SAMPLE_FIRST
  uint32_t sample_every = 16;                          // XPU_SAMPLE_EVERY (0 = never after first)
  uint32_t kernel_sample_every = 0;                    // XPU_KERNEL_SAMPLE_EVERY
  uint32_t ring_capacity = XPU_RING_DEFAULT_CAPACITY;  // XPU_RING_CAPACITY (power of two)
  uint32_t sig_capacity = XPU_RING_DEFAULT_SIG_CAPACITY;  // XPU_SIG_CAPACITY
  uint64_t str_capacity = XPU_RING_DEFAULT_STR_CAPACITY;  // XPU_STR_CAPACITY
  std::string ring_dir;                                   // XPU_RING_DIR ("" = memfd)
  bool daemon = true;                                     // XPU_DAEMON
  std::string daemon_socket;     // XPU_DAEMON_SOCKET or transport.h default
  std::string daemon_bin;        // XPU_DAEMON_BIN ("" = search)
  std::string engine;            // XPU_ENGINE, passed to an auto-started daemon
  uint32_t daemon_idle_exit_s = 600;  // XPU_DAEMON_IDLE_EXIT_S, an auto-started daemon's --idle-exit-s
  std::string job;               // resolved job identity
  std::string job_name;          // XPU_JOB_NAME
  std::string host;              // gethostname()
  uint32_t event_pool = 4096;    // XPU_EVENT_POOL (per device, per kind)
  uint32_t pending_max = 16384;  // XPU_PENDING_MAX
  uint32_t clock_recal_s = 5;    // XPU_CLOCK_RECAL_S
  uint32_t py_stack_depth = 8;   // XPU_PY_STACK_DEPTH (0 = no call sites)
  // Completion tracking and timing (docs/timing-policy.md).
  uint32_t marker_us = 500;          // XPU_MARKER_US: completion marker per stream and thread
  bool timing_hold = true;           // XPU_TIMING_HOLD: hold the stream around timed ops
  bool timing_correct = false;       // XPU_TIMING_CORRECT: subtract the event-pair overhead (over-corrects on H100: off)
  uint32_t hold_timeout_us = 2000;   // XPU_HOLD_TIMEOUT_US
  uint32_t uncovered_ms = 2000;      // XPU_UNCOVERED_MS: retire ops no marker covers
  int32_t rank = -1;             // RANK
  // XPU_LOG: what the hook prints on stderr, never on the launch path.
  // 0 "off", 1 "error" (default: set-up failures, one line each, once per
  // process, by rank 0 or a rank-less process), 2 "info" (every rank).
  int log_level = 1;
  int32_t local_rank = -1;       // LOCAL_RANK
  int32_t world_size = 0;        // WORLD_SIZE
  int32_t local_world_size = 0;  // LOCAL_WORLD_SIZE
};

// Returns the value of an environment variable or nullptr.
using EnvLookup = std::function<const char*(const char*)>;

// Builds the configuration from `env` (getenv in production, a map in
// tests). `pid`, `uid` and `host` feed the identity and path defaults.
Config LoadConfig(const EnvLookup& env, pid_t pid, uid_t uid, const std::string& host);

// transport.h socket path rules: $XPU_DAEMON_SOCKET, else
// $XDG_RUNTIME_DIR/xpu/daemon.sock, else /run/xpu/daemon.sock for root, else
// /tmp/xpu-<uid>/daemon.sock.
std::string DefaultSocketPath(const EnvLookup& env, uid_t uid);

// Strict parsers used by LoadConfig; exposed for tests. They return false
// (leaving *out untouched) on anything but a complete, in-range number.
bool ParseUint(const char* s, uint64_t max, uint64_t* out);
bool ParseInt(const char* s, int64_t min, int64_t max, int64_t* out);
// "1/0/on/off/true/false/yes/no" (case-insensitive).
bool ParseBool(const char* s, bool* out);

}  // namespace xpu::hook

#endif  // XPU_HOOK_PROCESS_CONFIG_H_
