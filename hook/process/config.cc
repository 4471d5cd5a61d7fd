// hook/process/config.cc — environment parsing. Runs once in the library
// constructor (single-threaded); allocation is fine here, never on the launch
// path.
#include "hook/process/config.h"

#include <strings.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

namespace xpu::hook {
namespace {

uint32_t RoundUpPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v && p < (1u << 31)) p <<= 1;
  return p;
}

// Reads an unsigned value in [lo, hi]; anything else keeps `def`.
uint64_t UintOr(const EnvLookup& env, const char* name, uint64_t def, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  if (!ParseUint(env(name), hi, &v) || v < lo) return def;
  return v;
}

int32_t IntOr(const EnvLookup& env, const char* name, int32_t def, int32_t lo) {
  int64_t v = 0;
  if (!ParseInt(env(name), lo, INT32_MAX, &v)) return def;
  return static_cast<int32_t>(v);
}

std::string StrOr(const EnvLookup& env, const char* name, const std::string& def) {
  const char* v = env(name);
  return (v != nullptr && v[0] != '\0') ? std::string(v) : def;
}

}  // namespace

bool ParseUint(const char* s, uint64_t max, uint64_t* out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;  // rejects "", "-1", " 1"
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v > max) return false;
  *out = v;
  return true;
}

bool ParseInt(const char* s, int64_t min, int64_t max, int64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

bool ParseBool(const char* s, bool* out) {
  if (s == nullptr) return false;
  static const char* const kTrue[] = {"1", "on", "true", "yes"};
  static const char* const kFalse[] = {"0", "off", "false", "no"};
  for (const char* t : kTrue) {
    if (strcasecmp(s, t) == 0) {
      *out = true;
      return true;
    }
  }
  for (const char* f : kFalse) {
    if (strcasecmp(s, f) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

std::string DefaultSocketPath(const EnvLookup& env, uid_t uid) {
  if (const char* s = env("XPU_DAEMON_SOCKET"); s != nullptr && s[0] != '\0') return s;
  if (const char* x = env("XDG_RUNTIME_DIR"); x != nullptr && x[0] == '/') {
    return std::string(x) + "/xpu/daemon.sock";
  }
  if (uid == 0) return "/run/xpu/daemon.sock";
  return "/tmp/xpu-" + std::to_string(uid) + "/daemon.sock";
}

Config LoadConfig(const EnvLookup& env, pid_t pid, uid_t uid, const std::string& host) {
  Config c;
  bool b = true;
  if (ParseBool(env("XPU_ENABLE"), &b)) c.enable = b;
  if (const char* t = env("XPU_TIMING"); t != nullptr) {
    if (strcasecmp(t, "sampled") == 0)
      c.timing = TimingPolicy::kSampled;
    else if (strcasecmp(t, "all") == 0)
      c.timing = TimingPolicy::kAll;
    else if (strcasecmp(t, "off") == 0)
      c.timing = TimingPolicy::kOff;
  }
  c.sample_first = static_cast<uint32_t>(UintOr(env, "XPU_SAMPLE_FIRST", 32, 0, 1u << 30));
  c.sample_every = static_cast<uint32_t>(UintOr(env, "XPU_SAMPLE_EVERY", 16, 0, 1u << 30));
  c.kernel_sample_every =
      static_cast<uint32_t>(UintOr(env, "XPU_KERNEL_SAMPLE_EVERY", 0, 0, 1u << 30));
  // Bounds keep the file mappable and the index arithmetic far from overflow.
  c.ring_capacity = RoundUpPow2(static_cast<uint32_t>(
      UintOr(env, "XPU_RING_CAPACITY", XPU_RING_DEFAULT_CAPACITY, 16, 1u << 24)));
  c.sig_capacity = static_cast<uint32_t>(
      UintOr(env, "XPU_SIG_CAPACITY", XPU_RING_DEFAULT_SIG_CAPACITY, 16, 1u << 20));
  c.str_capacity = UintOr(env, "XPU_STR_CAPACITY", XPU_RING_DEFAULT_STR_CAPACITY, 4096, 1ull << 28);
  c.ring_dir = StrOr(env, "XPU_RING_DIR", "");
  if (ParseBool(env("XPU_DAEMON"), &b)) c.daemon = b;
  c.daemon_socket = DefaultSocketPath(env, uid);
  c.daemon_bin = StrOr(env, "XPU_DAEMON_BIN", "");
  c.engine = StrOr(env, "XPU_ENGINE", "");
  c.daemon_idle_exit_s =
      static_cast<uint32_t>(UintOr(env, "XPU_DAEMON_IDLE_EXIT_S", 600, 0, 7 * 24 * 3600));
  c.job_name = StrOr(env, "XPU_JOB_NAME", "");
  c.host = host;
  c.event_pool = static_cast<uint32_t>(UintOr(env, "XPU_EVENT_POOL", 4096, 16, 1u << 16));
  c.pending_max = static_cast<uint32_t>(UintOr(env, "XPU_PENDING_MAX", 16384, 64, 1u << 20));
  c.clock_recal_s = static_cast<uint32_t>(UintOr(env, "XPU_CLOCK_RECAL_S", 5, 1, 3600));
  c.marker_us = static_cast<uint32_t>(UintOr(env, "XPU_MARKER_US", 500, 0, 10000000));
  if (ParseBool(env("XPU_TIMING_HOLD"), &b)) c.timing_hold = b;
  if (ParseBool(env("XPU_TIMING_CORRECT"), &b)) c.timing_correct = b;
  c.hold_timeout_us = static_cast<uint32_t>(UintOr(env, "XPU_HOLD_TIMEOUT_US", 2000, 50, 1000000));
  c.uncovered_ms = static_cast<uint32_t>(UintOr(env, "XPU_UNCOVERED_MS", 2000, 10, 3600000));
  // Python call sites on sampled launches (py_callsite.h); out-of-range
  // values are clamped rather than ignored: asking for more frames than we
  // walk still means "as many as you walk". XPU_PYTHON=off turns every Python
  // feature off, this one included.
  uint64_t depth = 0;
  if (ParseUint(env("XPU_PY_STACK_DEPTH"), UINT32_MAX, &depth)) {
    c.py_stack_depth = static_cast<uint32_t>(depth > 64 ? 64 : depth);
  }
  if (const char* py = env("XPU_PYTHON"); py != nullptr && ParseBool(py, &b) && !b) {
    c.py_stack_depth = 0;
  }

  // Job identity: the launcher's run id first, so that all ranks agree.
  // torchrun without --rdzv-id (and without --standalone) sets the run id "none":
  // not an identity, so the next source decides.
  c.job = StrOr(env, "TORCHELASTIC_RUN_ID", "");
  if (c.job == "none") c.job.clear();
  if (c.job.empty()) c.job = StrOr(env, "SLURM_JOB_ID", "");
  if (c.job.empty()) c.job = StrOr(env, "XPU_JOB", "");
  if (c.job.empty()) c.job = "pid-" + std::to_string(pid) + "@" + host;

  c.rank = IntOr(env, "RANK", -1, 0);
  if (const char* l = env("XPU_LOG")) {
    const std::string v = l;
    if (v == "off" || v == "0" || v == "none") c.log_level = 0;
    if (v == "info" || v == "debug" || v == "2") c.log_level = 2;
  }
  c.local_rank = IntOr(env, "LOCAL_RANK", -1, 0);
  c.world_size = IntOr(env, "WORLD_SIZE", 0, 1);
  c.local_world_size = IntOr(env, "LOCAL_WORLD_SIZE", 0, 1);
  return c;
}

}  // namespace xpu::hook
