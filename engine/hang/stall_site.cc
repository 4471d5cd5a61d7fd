// engine/hang/stall_site.cc — see stall_site.h.
#include "engine/hang/stall_site.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "xpu/record.h"

namespace xpu::engine::hang {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Seconds(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ns) * 1e-9);
  return buf;
}

// ", main thread sleeping in futex_wait_queue, 0.0 CPU" from the thread
// states and the CPU sample.
std::string Activity(const RankEvidence& r) {
  std::string out;
  const std::string main = MainThreadState(r);
  if (!main.empty()) {
    // "tid name state wchan"
    size_t a = main.find(' '), b = a == std::string::npos ? a : main.find(' ', a + 1),
           c = b == std::string::npos ? b : main.find(' ', b + 1);
    if (c != std::string::npos) {
      const std::string state = main.substr(b + 1, c - b - 1), wchan = main.substr(c + 1);
      out += ", main thread " + state + (wchan != "-" ? " in " + wchan : "");
    }
  }
  if (r.cpu_busy >= 0) {
    char buf[64];
    snprintf(buf, sizeof(buf), ", %.2f CPU%s", r.cpu_busy, r.cpu_busy >= 0.5 ? " (spinning)" : "");
    out += buf;
  }
  return out;
}

}  // namespace

const char* StallKindName(StallSite::Kind k) {
  switch (k) {
    case StallSite::Kind::kGpuKernel:
      return "gpu-kernel";
    case StallSite::Kind::kDataLoading:
      return "data-loading";
    case StallSite::Kind::kPython:
      return "python";
    case StallSite::Kind::kNative:
      return "native";
    case StallSite::Kind::kUnknown:
      break;
  }
  return "unknown";
}

bool IsDataLoadingFrame(std::string_view frame) {
  const std::string f = Lower(frame);
  return f.find("dataloader") != std::string::npos || f.find("recv_into") != std::string::npos ||
         f.find("(fetch.py)") != std::string::npos || f.find("_next_data") != std::string::npos ||
         f.find("load_batch") != std::string::npos;
}

std::string MainThreadState(const RankEvidence& r) {
  const size_t end = r.threads.find('\n');
  return r.threads.substr(0, end);
}

namespace {

bool IsOverdueKernel(const RankEvidence& r) {
  return r.overdue.set && r.overdue.comm_id == 0 && r.overdue.kind != XPU_OP_NONE &&
         !xpu_op_is_collective(static_cast<uint16_t>(r.overdue.kind)) &&
         r.overdue.kind <= XPU_OP_MEMCPY;
}

bool EnteredLaterCollective(const RankEvidence& r) {
  for (const CommState& c : r.comms) {
    if (c.pending_seq == 0 || c.pending_since_ns < r.overdue.since_ns) continue;
    for (const KernelProgress& k : r.kernel) {
      if (k.seq == c.pending_seq && k.completed_seq < k.seq) return true;
    }
  }
  return false;
}

}  // namespace

bool HasStuckKernel(const RankEvidence& r) {
  if (!IsOverdueKernel(r)) return false;
  for (const CommState& c : r.comms) {
    if (c.pending_seq != 0 && c.pending_since_ns != 0 && c.pending_since_ns < r.overdue.since_ns)
      return false;  // an older collective holds the rank: not the kernel's doing
  }
  // Inside the kernel of a collective issued after it: the GPU ran past the
  // kernel (the collective's stream waited for the work before it); only
  // the completion mark that would say so is queued behind the collective.
  return !EnteredLaterCollective(r);
}

StallSite WhereStalled(const RankEvidence& r, uint64_t now_ns) {
  StallSite s;
  if (HasStuckKernel(r)) {
    s.kind = StallSite::Kind::kGpuKernel;
    s.frame = r.overdue.name.empty() ? "kernel" : r.overdue.name;
    s.team = "operations";
    s.summary = "GPU kernel " + s.frame + " (#" + std::to_string(r.overdue.seq) + " on stream " +
                std::to_string(r.overdue.stream) + ") never completes" +
                (now_ns > r.overdue.since_ns && r.overdue.since_ns != 0
                     ? ": outstanding for " + Seconds(now_ns - r.overdue.since_ns)
                     : std::string()) +
                (r.overdue.threshold_ns != 0
                     ? " (its longest recent run x4 or the floor: " +
                           Seconds(r.overdue.threshold_ns) + ")"
                     : std::string());
    return s;
  }
  s.team = "algorithm";
  if (const ThreadStack* t = MainThread(r.python); t != nullptr && !t->frames.empty()) {
    // Innermost first: the first data-loading frame from the inside wins.
    for (size_t i = t->frames.size(); i-- > 0 && t->frames.size() - i <= 12;) {
      if (IsDataLoadingFrame(t->frames[i])) {
        s.kind = StallSite::Kind::kDataLoading;
        s.frame = t->frames[i];
        s.summary = "stuck in data loading at " + Innermost(*t, 3);
        return s;
      }
    }
    s.kind = StallSite::Kind::kPython;
    s.frame = t->frames.back();
    s.summary = "stuck in Python at " + Innermost(*t, 3);
    return s;
  }
  for (const OpenInterval& o : r.open) {
    if (o.kind == XPU_OP_PY_DATALOADER) {
      s.kind = StallSite::Kind::kDataLoading;
      s.frame = o.name;
      s.summary = "stuck in data loading (" + o.name + " open)";
      return s;
    }
  }
  if (const ThreadStack* t = MainThread(r.native); t != nullptr && !t->frames.empty()) {
    s.kind = StallSite::Kind::kNative;
    s.frame = t->frames.back();
    s.summary = "stuck in native code at " + Innermost(*t, 3) + Activity(r);
    return s;
  }
  s.summary = "outside any collective, no stacks yet" + Activity(r);
  return s;
}

}  // namespace xpu::engine::hang
