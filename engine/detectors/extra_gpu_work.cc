#include "engine/detectors/extra_gpu_work.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"

namespace xpu::engine {
namespace {

// One signature's calls on one rank within its complete steps.
struct Calls {
  double count = 0;   // calls
  double dur_s = 0;   // summed duration of the timed ones
  double timed = 0;   // timed calls
};

struct RankWork {
  size_t index = 0;  // in the view
  size_t steps = 0;
  double step_s = 0;                           // summed step time
  std::unordered_map<uint32_t, Calls> calls;  // by signature key
  double PerStep(uint32_t key) const {
    auto it = calls.find(key);
    return it == calls.end() ? 0 : it->second.count / static_cast<double>(steps);
  }
};

std::string SigKey(const analysis::OpSig& s) {
  return absl::StrCat(s.kind, "|", s.name, "|", s.m, "x", s.n, "x", s.k, "x", s.batch, "|",
                      s.dtype);
}

// What a rank runs per complete step, by signature key (`keys` interns them
// across the job); its role is the shapes of its collectives.
RankWork Measure(const analysis::RankTrace& t, const analysis::Steps& st,
                 std::unordered_map<std::string, uint32_t>* keys, std::string* role) {
  RankWork w;
  const auto& b = st.boundaries_ns;
  if (b.size() < 2) return w;
  w.steps = b.size() - 1;
  w.step_s = static_cast<double>(b.back() - b.front()) * 1e-9;
  std::unordered_map<uint32_t, uint32_t> key_of;  // sig id -> key
  for (const auto& [id, s] : t.sigs) {
    if (analysis::IsComputeKernel(s.kind)) {
      key_of[id] = keys->emplace(SigKey(s), static_cast<uint32_t>(keys->size())).first->second;
    }
  }
  // The role: the shapes of the collectives the rank ran in the window (not
  // one-time ones of its start-up).
  std::vector<uint32_t> coll_ids;
  for (const analysis::Op& op : t.ops) {
    if (xpu_op_is_collective(op.kind)) coll_ids.push_back(op.sig_id);
  }
  std::sort(coll_ids.begin(), coll_ids.end());
  coll_ids.erase(std::unique(coll_ids.begin(), coll_ids.end()), coll_ids.end());
  std::vector<std::string> shapes;
  for (uint32_t id : coll_ids) {
    if (const analysis::OpSig* s = t.Sig(id)) {
      shapes.push_back(absl::StrCat(s->kind, ":", s->bytes, ":", s->dtype, ":", s->comm_nranks));
    }
  }
  std::sort(shapes.begin(), shapes.end());
  shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
  *role = absl::StrJoin(shapes, ",");
  for (const analysis::Op& op : t.ops) {
    if (op.start_ns < b.front() || op.start_ns >= b.back()) continue;
    auto k = key_of.find(op.sig_id);
    if (k == key_of.end()) continue;
    Calls& c = w.calls[k->second];
    c.count += 1;
    if (op.timed()) {
      c.dur_s += static_cast<double>(op.dur_ns) * 1e-9;
      c.timed += 1;
    }
  }
  return w;
}

struct Extra {
  double s_per_step = 0;
  double calls_per_step = 0;
  uint32_t top_key = 0;  // the signature that adds the most time
  double top_calls = 0, top_s = 0;
};

// What a role's ranks run per step, by signature key: the median over its
// ranks of the calls per step (0 for a rank that never calls it), and the
// mean duration of the timed calls. Found once per role: per rank judged,
// the pass was quadratic in the role's size.
struct RoleReference {
  std::unordered_map<uint32_t, double> median_per_step, mean_dur_s;
};

RoleReference ReferenceOf(const std::vector<size_t>& role, const std::vector<RankWork>& work) {
  std::unordered_map<uint32_t, std::vector<double>> per_step;
  std::unordered_map<uint32_t, std::pair<double, double>> dur;  // summed duration, timed calls
  for (size_t j : role) {
    for (const auto& [key, c] : work[j].calls) {
      per_step[key].push_back(work[j].PerStep(key));
      dur[key].first += c.dur_s;
      dur[key].second += c.timed;
    }
  }
  RoleReference ref;
  for (auto& [key, v] : per_step) {
    v.resize(role.size(), 0.0);  // the ranks without the key call it 0 times
    ref.median_per_step[key] = analysis::Median(std::move(v));
    const auto& [sum, n] = dur[key];
    ref.mean_dur_s[key] = n > 0 ? sum / n : 0;
  }
  return ref;
}

// Rank `i` of `role` (indices into `work`) against its peers: the other
// rank of two, else the role's reference.
Extra ExtraOf(size_t i, const std::vector<size_t>& role, const std::vector<RankWork>& work,
              const RoleReference& ref) {
  Extra e;
  const RankWork& me = work[i];
  for (const auto& [key, c] : me.calls) {
    const double peers = role.size() == 2 ? work[role[0] == i ? role[1] : role[0]].PerStep(key)
                                          : ref.median_per_step.at(key);
    const double more = me.PerStep(key) - peers;
    if (more <= 0) continue;
    double dur = c.timed > 0 ? c.dur_s / c.timed : 0;
    if (dur == 0) dur = ref.mean_dur_s.at(key);  // the role's mean duration of the signature
    e.calls_per_step += more;
    e.s_per_step += more * dur;
    if (more * dur > e.top_s) e.top_key = key, e.top_calls = more, e.top_s = more * dur;
  }
  return e;
}

}  // namespace

void ExtraGpuWorkDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  Streaks::Window held = streaks_.Begin(job.job());
  if (v.ranks.size() < 2) return;
  const double min_share = Param(v, "extra_work.min_share");
  const int persist = std::max(1, static_cast<int>(Param(v, "extra_work.persist_windows")));
  std::unordered_map<std::string, uint32_t> keys;
  std::vector<RankWork> work;
  std::unordered_map<std::string, std::vector<size_t>> roles;
  for (size_t r = 0; r < v.ranks.size(); ++r) {
    std::string role;
    RankWork w = Measure(v.ranks[r], v.StepsOf(v.ranks[r]), &keys, &role);
    w.index = r;
    if (w.steps == 0 || w.step_s <= 0) continue;
    roles[role].push_back(work.size());
    work.push_back(std::move(w));
  }
  std::vector<std::string> names(keys.size());
  for (const auto& [name, k] : keys) names[k] = name;
  Diagnosis d = NewDiagnosis(job, "extra_gpu_work", Team::kAlgorithm);
  std::vector<std::pair<int32_t, std::string>> found;
  for (const auto& [role, members] : roles) {
    if (members.size() < 2) continue;
    const RoleReference ref = ReferenceOf(members, work);
    for (size_t i : members) {
      const RankWork& w = work[i];
      const Extra e = ExtraOf(i, members, work, ref);
      const double step = w.step_s / static_cast<double>(w.steps);
      const double share = e.s_per_step / step;
      const int32_t rank = v.ranks[w.index].rank;
      if (share < min_share || held.Hold(absl::StrCat(rank)) < persist) continue;
      found.emplace_back(
          rank, absl::StrCat("rank ", rank, ": ", Fmt(e.calls_per_step, 1),
                             " more GPU calls per step than its ", members.size() - 1,
                             " peer(s), ", Fmt(e.s_per_step * 1e3, 2), " ms per ",
                             Fmt(step * 1e3, 1), " ms step (", Fmt(share * 100, 1),
                             " %), most from ", Fmt(e.top_calls, 1), " x ", names[e.top_key],
                             " (", Fmt(e.top_s * 1e3, 2), " ms)"));
    }
  }
  if (found.empty()) return;
  std::sort(found.begin(), found.end());
  std::vector<std::string> lines;
  for (auto& [rank, line] : found) {
    d.ranks.push_back(rank);
    lines.push_back(std::move(line));
  }
  d.hosts = HostsOf(v, d.ranks);
  d.subject = "extra_gpu_work";
  d.severity = Severity::kWarning;
  d.evidence = absl::StrCat(
      "extra GPU work on ", d.ranks.size(),
      " rank(s) that its peers (same collectives, same program) do not run: ",
      absl::StrJoin(lines, " | "), " (signature: kind|name|m x n x k x batch|dtype; from ",
      Fmt(min_share * 100, 1), " % of the step)");
  sink.Report(std::move(d));
}

}  // namespace xpu::engine
