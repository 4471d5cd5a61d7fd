#include "common/analysis/behavior_pattern.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace xpu::analysis {
namespace {

bool IsPythonKind(uint16_t kind) {
  return (kind >= XPU_OP_PY_GC && kind <= XPU_OP_PY_API) || kind == XPU_OP_ANNOTATION;
}

// One execution of a function, clipped nowhere yet.
struct Exec {
  uint64_t start = 0, end = 0;
  uint16_t thread = 0;  // Python: interned thread index
  size_t fn = 0;        // index into the function list
};

std::vector<Interval> Clip(const std::vector<Interval>& v, uint64_t t0, uint64_t t1) {
  std::vector<Interval> out;
  for (const Interval& i : v) {
    uint64_t a = std::max(i.first, t0), b = std::min(i.second, t1);
    if (a < b) out.emplace_back(a, b);
  }
  return out;
}

}  // namespace

const char* FunctionClassName(FunctionClass c) {
  switch (c) {
    case FunctionClass::kGpuCompute:
      return "gpu_compute";
    case FunctionClass::kMemory:
      return "memory";
    case FunctionClass::kCollective:
      return "collective";
    case FunctionClass::kPython:
      return "python";
  }
  return "unknown";
}

bool ParseFunctionClass(uint32_t value, FunctionClass* out) {
  if (value < 1 || value > 4) return false;
  *out = static_cast<FunctionClass>(value);
  return true;
}

bool ClassifyFunction(const Op& op, const OpSig& sig, FunctionClass* cls) {
  if (op.flags & XPU_REC_PROFILE_WINDOW) {
    if (op.kind != XPU_OP_KERNEL) return false;
    *cls = sig.name.compare(0, 4, "nccl") == 0 ? FunctionClass::kCollective
                                               : FunctionClass::kGpuCompute;
    return true;
  }
  if (op.kind == XPU_OP_MEMCPY && op.timed()) {
    *cls = FunctionClass::kMemory;
    return true;
  }
  if ((op.flags & XPU_REC_HOST) && IsPythonKind(op.kind)) {
    *cls = FunctionClass::kPython;
    return true;
  }
  return false;
}

std::vector<Interval> UnionOf(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.first >= i.second) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::vector<Interval> Subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (const Interval& i : a) {
    uint64_t cur = i.first;
    while (j < b.size() && b[j].second <= cur) ++j;
    size_t k = j;
    while (cur < i.second) {
      if (k >= b.size() || b[k].first >= i.second) {
        out.emplace_back(cur, i.second);
        break;
      }
      if (b[k].first > cur) out.emplace_back(cur, b[k].first);
      cur = std::max(cur, b[k].second);
      ++k;
    }
  }
  return out;
}

uint64_t TotalLength(const std::vector<Interval>& v) {
  uint64_t n = 0;
  for (const Interval& i : v) n += i.second - i.first;
  return n;
}

namespace {

// T: the window, or its complete iterations when options ask for them and
// at least one lies inside.
void ChoosePeriod(const RankTrace& trace, uint64_t window_start_ns, uint64_t window_end_ns,
                  const BehaviorOptions& options, BehaviorSummary* out) {
  out->t0_ns = window_start_ns;
  out->t1_ns = window_end_ns;
  if (!options.use_iterations) return;
  Steps steps = FindSteps(trace);
  std::vector<uint64_t> inside;
  for (uint64_t b : steps.boundaries_ns) {
    if (b >= window_start_ns && b <= window_end_ns) inside.push_back(b);
  }
  if (inside.size() >= 2) {
    out->t0_ns = inside.front();
    out->t1_ns = inside.back();
    out->iterations = static_cast<uint32_t>(inside.size() - 1);
    out->step_source = steps.source;
  }
}

// The functions of the trace and their executions.
struct Executions {
  std::vector<FunctionSummary> fns;  // name and class only, so far
  std::vector<Exec> execs;
};

// Functions and their executions. Python intervals: an END record holds the
// whole interval (its start is the BEGIN's); a BEGIN without its END is
// still open and lasts until the window's end. Counts the profiling
// window's kernels inside T in `out`.
Executions CollectExecutions(const RankTrace& trace, uint64_t window_end_ns, BehaviorSummary* out) {
  const uint64_t t0 = out->t0_ns, t1 = out->t1_ns;
  std::set<std::tuple<uint32_t, uint16_t, uint64_t>> ended;  // (sig, thread, start)
  for (const Op& op : trace.ops) {
    if ((op.flags & XPU_REC_HOST) && (op.flags & XPU_REC_END))
      ended.insert({op.sig_id, op.stream, op.start_ns});
  }
  std::map<std::pair<FunctionClass, std::string>, size_t> index;
  Executions x;
  for (const Op& op : trace.ops) {
    const OpSig* sig = trace.Sig(op.sig_id);
    FunctionClass cls;
    if (sig == nullptr || !ClassifyFunction(op, *sig, &cls)) continue;
    Exec e{op.start_ns, op.end_ns(), static_cast<uint16_t>(op.stream), 0};
    if (cls == FunctionClass::kPython && (op.flags & XPU_REC_BEGIN)) {
      if (ended.count({op.sig_id, op.stream, op.start_ns})) continue;
      e.end = std::max(window_end_ns, op.start_ns);
    }
    if ((op.flags & XPU_REC_PROFILE_WINDOW) && op.start_ns < t1 && op.end_ns() > t0)
      ++out->window_kernels;
    auto key = std::make_pair(cls, sig->name);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, x.fns.size()).first;
      FunctionSummary f;
      f.name = sig->name;
      f.cls = cls;
      x.fns.push_back(std::move(f));
    }
    e.fn = it->second;
    x.execs.push_back(e);
  }
  return x;
}

// Pace sums over the executions that start in [t0, t1) (each counted once).
void AddPace(uint64_t t0, uint64_t t1, Executions& x) {
  for (const Exec& e : x.execs) {
    if (e.start < t0 || e.start >= t1 || e.end <= e.start) continue;
    FunctionSummary& f = x.fns[e.fn];
    const uint64_t d = e.end - e.start;
    ++f.executions;
    f.exec_ns += d;
    f.inv_exec_per_s += 1e9 / static_cast<double>(d);
    f.min_exec_ns = f.min_exec_ns == 0 ? d : std::min(f.min_exec_ns, d);
  }
}

// Busy intervals per function (self segments: an execution minus its
// nested Python children) and per class (whole executions).
struct Busy {
  std::vector<std::vector<Interval>> by_function;
  std::vector<std::vector<Interval>> by_class = std::vector<std::vector<Interval>>(5);
};

Busy BusyIntervals(const Executions& x) {
  Busy busy;
  busy.by_function.resize(x.fns.size());
  std::vector<size_t> python;
  for (size_t i = 0; i < x.execs.size(); ++i) {
    const Exec& e = x.execs[i];
    if (e.end <= e.start) continue;
    const FunctionClass cls = x.fns[e.fn].cls;
    busy.by_class[static_cast<int>(cls)].emplace_back(e.start, e.end);
    if (cls == FunctionClass::kPython) {
      python.push_back(i);
    } else {
      busy.by_function[e.fn].emplace_back(e.start, e.end);
    }
  }
  std::sort(python.begin(), python.end(), [&](size_t a, size_t b) {
    const Exec &p = x.execs[a], &q = x.execs[b];
    return std::tie(p.thread, p.start, q.end) < std::tie(q.thread, q.start, p.end);
  });
  for (size_t p = 0; p < python.size(); ++p) {
    const Exec& parent = x.execs[python[p]];
    std::vector<Interval> children;
    for (size_t q = p + 1; q < python.size(); ++q) {
      const Exec& c = x.execs[python[q]];
      if (c.thread != parent.thread || c.start >= parent.end) break;
      const bool strictly_inside =
          c.end <= parent.end && (c.start > parent.start || c.end < parent.end);
      if (strictly_inside) children.emplace_back(c.start, c.end);
    }
    std::vector<Interval> self =
        Subtract({{parent.start, parent.end}}, UnionOf(std::move(children)));
    busy.by_function[parent.fn].insert(busy.by_function[parent.fn].end(), self.begin(), self.end());
  }
  return busy;
}

// Critical time and beta of each function (eq. 2): its busy time in T that
// no function of a higher-priority class covers.
void AssignCriticalTime(uint64_t t0, uint64_t t1, Busy busy, std::vector<FunctionSummary>& fns) {
  std::vector<Interval> higher;  // union of classes above the current one
  const double span = static_cast<double>(t1 - t0);
  for (int c = 1; c <= 4; ++c) {
    for (size_t i = 0; i < fns.size(); ++i) {
      if (static_cast<int>(fns[i].cls) != c) continue;
      std::vector<Interval> mine = Clip(UnionOf(std::move(busy.by_function[i])), t0, t1);
      fns[i].critical_ns = TotalLength(Subtract(mine, higher));
      fns[i].beta = static_cast<double>(fns[i].critical_ns) / span;
    }
    std::vector<Interval> add = Clip(UnionOf(std::move(busy.by_class[c])), t0, t1);
    add.insert(add.end(), higher.begin(), higher.end());
    higher = UnionOf(std::move(add));
  }
}

}  // namespace

BehaviorSummary SummarizeBehavior(const RankTrace& trace, uint64_t window_start_ns,
                                  uint64_t window_end_ns, const BehaviorOptions& options) {
  BehaviorSummary out;
  if (window_end_ns <= window_start_ns) return out;
  ChoosePeriod(trace, window_start_ns, window_end_ns, options, &out);
  Executions x = CollectExecutions(trace, window_end_ns, &out);
  AddPace(out.t0_ns, out.t1_ns, x);
  AssignCriticalTime(out.t0_ns, out.t1_ns, BusyIntervals(x), x.fns);

  // Functions that ran in T, the largest share first.
  for (FunctionSummary& f : x.fns) {
    if (f.executions > 0 || f.critical_ns > 0) out.functions.push_back(std::move(f));
  }
  std::sort(out.functions.begin(), out.functions.end(),
            [](const FunctionSummary& a, const FunctionSummary& b) {
              return std::tie(b.beta, b.exec_ns, a.name) < std::tie(a.beta, a.exec_ns, b.name);
            });
  if (out.functions.size() > options.max_functions) {
    out.functions_omitted = out.functions.size() - options.max_functions;
    out.functions.resize(options.max_functions);
  }
  return out;
}

Pattern PatternOf(const FunctionSummary& s, uint64_t reference_ns) {
  Pattern p;
  p.beta = s.beta;
  if (s.executions == 0 || s.exec_ns == 0 || reference_ns == 0) return p;
  const double r = static_cast<double>(reference_ns);
  const double total = static_cast<double>(s.exec_ns);
  p.mu = r * static_cast<double>(s.executions) / total;
  // sum_e |L(e)| u(e)^2 / S with u(e) = r / |L(e)|; 1/|L(e)| from 1/s to 1/ns.
  const double second = r * r * (s.inv_exec_per_s * 1e-9) / total;
  p.sigma = std::sqrt(std::max(0.0, second - p.mu * p.mu));
  return p;
}

}  // namespace xpu::analysis
