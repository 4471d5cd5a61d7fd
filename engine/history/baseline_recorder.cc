#include "engine/history/baseline_recorder.h"

#include <algorithm>
#include <set>

#include "common/analysis/collective.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"
#include "common/analysis/steps.h"
#include "common/analysis/void_time.h"
#include "engine/history/history.h"

namespace xpu::engine::history {
namespace {

// Findings that describe the workload rather than a fault: they persist from
// run to run, so a window that has them still shows the job's normal figures.
bool SteadyKind(const std::string& kind) {
  return kind == "void_minority" || kind == "unoptimized_gemm";
}

}  // namespace

void BaselineRecorder::Series::Add(double v, uint64_t n) {
  values.push_back(v);
  while (values.size() > kMaxWindows) values.pop_front();
  count += n;
}

double BaselineRecorder::Series::Median() const {
  return analysis::Median(std::vector<double>(values.begin(), values.end()));
}

BaselineRecorder::BaselineRecorder(std::shared_ptr<WindowViews> views,
                                   std::shared_ptr<const DetectorConfig> config, Writer writer)
    : views_(std::move(views)), config_(std::move(config)), writer_(std::move(writer)) {}

bool BaselineRecorder::Healthy(const std::vector<Diagnosis>& diagnoses) {
  return std::all_of(diagnoses.begin(), diagnoses.end(),
                     [](const Diagnosis& d) { return SteadyKind(d.kind); });
}

void BaselineRecorder::OnWindow(const JobState& job, const std::vector<Diagnosis>& diagnoses,
                                uint64_t now_ns) {
  if (!Healthy(diagnoses)) return;
  Take(job, Measure(job), diagnoses, now_ns);
}

BaselineRecorder::WindowFigures BaselineRecorder::Measure(const JobState& job) const {
  WindowFigures w;
  // The job's name and GPU model as the view copied them: the recorder
  // runs without the job's lock.
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty() || v.backbone.empty()) return w;
  w.measured = true;
  w.job_name = v.backbone;
  w.gpu_model = v.gpu_model;
  w.min_windows = static_cast<int>(config_->Get("history.baseline_windows", v.backbone));
  w.keep_runs = static_cast<int>(config_->Get("history.runs", v.backbone));

  // Step time on the same reference rank as throughput_regression.
  for (const analysis::RankTrace& t : v.ranks) {
    std::vector<double> d = v.StepsOf(t).DurationsS();
    if (d.empty()) continue;
    w.step_median_s = analysis::Median(d);
    w.steps = d.size();
    break;
  }

  // Void percentages and issue latencies, per rank.
  for (const analysis::RankTrace& t : v.ranks) {
    const analysis::VoidFigures& f = v.VoidOf(t);
    if (f.steps > 0) {
      w.void_inter.push_back(f.VInter());
      w.void_minority.push_back(f.VMinority());
    }
    for (auto [family, name] : {std::pair{analysis::KernelFamily::kCompute, kFamilyCompute},
                                {analysis::KernelFamily::kCommunication, kFamilyCommunication}}) {
      std::vector<double> us = analysis::IssueLatenciesUs(t, family);
      if (!us.empty()) w.issue_latency[name].AddAll(us);
    }
  }

  // GEMM TFLOPS per stable signature: over the ranks that ran it.
  const uint64_t min_count = static_cast<uint64_t>(config_->Get("slow_gpu.min_count", v.backbone));
  for (const analysis::RankTrace& t : v.ranks) {
    for (const auto& [key, g] : v.GemmsOf(t)) {
      if (g.count < min_count || g.Tflops() <= 0) continue;
      Shape& slot = w.gemm[StableGemmKey(g.sig)];
      slot.dtype = GemmDtypeClass(g.sig.dtype);
      slot.values.push_back(g.Tflops());
      slot.count += g.count;
    }
  }

  // Collective busbw per shape: over the communicators of the shape.
  for (const analysis::CommBandwidth& c : v.Communicators()) {
    if (c.BusBw() <= 0) continue;
    CollectiveShape s{OpKindName(c.kind), c.bytes, c.nranks, static_cast<int32_t>(c.hosts.size())};
    Shape& slot = w.busbw[s];
    slot.values.push_back(c.BusBw());
    slot.count += c.count;
  }
  return w;
}

void BaselineRecorder::Take(const JobState& job, WindowFigures w,
                            const std::vector<Diagnosis>& diagnoses, uint64_t now_ns) {
  if (!Healthy(diagnoses) || !w.measured) return;
  Run& run = runs_[job.job()];
  if (run.windows > 0 && (run.gpu_model != w.gpu_model || run.job_name != w.job_name)) {
    // The key changed under the job (a GPU model reported late): what was
    // collected belongs to the old key; start over rather than mix.
    run = Run();
  }
  run.job_name = w.job_name;
  run.gpu_model = w.gpu_model;
  bool any = false;
  if (w.steps > 0) {
    run.step.Add(w.step_median_s, w.steps);
    run.steps += w.steps;
    run.step_best = run.step_best > 0 ? std::min(run.step_best, w.step_median_s) : w.step_median_s;
    any = true;
  }
  for (const auto& [name, h] : w.issue_latency) {
    run.issue_latency[name].Merge(h);
    any = true;
  }
  if (!w.void_inter.empty()) {
    run.void_inter.Add(analysis::Median(w.void_inter), w.void_inter.size());
    run.void_minority.Add(analysis::Median(w.void_minority), w.void_minority.size());
    any = true;
  }
  // Each figure: the median over the ranks (GEMMs) or communicators.
  for (auto& [key, g] : w.gemm) {
    auto& slot = run.gemm[key];
    slot.first = g.dtype;
    slot.second.Add(analysis::Median(std::move(g.values)), g.count);
    any = true;
  }
  for (auto& [s, g] : w.busbw) {
    run.busbw[s].Add(analysis::Median(std::move(g.values)), g.count);
    any = true;
  }
  if (!any) return;
  run.windows++;
  if (static_cast<int>(run.windows) < std::max(1, w.min_windows)) return;
  if (writer_) writer_(Snapshot(job.job(), run, now_ns), w.keep_runs);
}

RunBaseline BaselineRecorder::Snapshot(const std::string& job, const Run& r,
                                       uint64_t now_ns) const {
  RunBaseline b;
  b.job_name = r.job_name;
  b.gpu_model = r.gpu_model;
  b.job = job;
  b.updated_ns = now_ns;
  b.windows = r.windows;
  b.steps = r.steps;
  if (!r.step.values.empty()) {
    b.step_median_s = r.step.Median();
    b.step_best_s = r.step_best;
  }
  if (!r.void_inter.values.empty()) {
    b.void_inter = r.void_inter.Median();
    b.void_minority = r.void_minority.Median();
  }
  for (const auto& [key, g] : r.gemm)
    b.gemm[key] = GemmFigure{g.first, g.second.Median(), g.second.count};
  for (const auto& [s, series] : r.busbw) b.busbw[s] = BusBwFigure{series.Median(), series.count};
  b.issue_latency = r.issue_latency;
  return b;
}

std::optional<RunBaseline> BaselineRecorder::Current(const std::string& job) const {
  auto it = runs_.find(job);
  if (it == runs_.end() || it->second.windows == 0) return std::nullopt;
  return Snapshot(job, it->second, 0);
}

void BaselineRecorder::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  for (auto it = runs_.begin(); it != runs_.end();) {
    it = keep.count(it->first) ? std::next(it) : runs_.erase(it);
  }
}

}  // namespace xpu::engine::history
