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
  // The job's name and GPU model as the view copied them: the recorder
  // runs without the job's lock.
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty() || v.backbone.empty()) return;
  Run& run = runs_[job.job()];
  const std::string& model = v.gpu_model;
  if (run.windows > 0 && (run.gpu_model != model || run.job_name != v.backbone)) {
    // The key changed under the job (a GPU model reported late): what was
    // collected belongs to the old key; start over rather than mix.
    run = Run();
  }
  run.job_name = v.backbone;
  run.gpu_model = model;
  bool any = false;

  // Step time on the same reference rank as throughput_regression.
  for (const analysis::RankTrace& t : v.ranks) {
    std::vector<double> d = v.StepsOf(t).DurationsS();
    if (d.empty()) continue;
    const double med = analysis::Median(d);
    run.step.Add(med, d.size());
    run.steps += d.size();
    run.step_best = run.step_best > 0 ? std::min(run.step_best, med) : med;
    any = true;
    break;
  }

  // Void percentages and issue latencies, per rank.
  std::vector<double> vi, vm;
  for (const analysis::RankTrace& t : v.ranks) {
    analysis::VoidFigures f = analysis::ComputeVoid(t, v.StepsOf(t));
    if (f.steps > 0) {
      vi.push_back(f.VInter());
      vm.push_back(f.VMinority());
    }
    for (auto [family, name] : {std::pair{analysis::KernelFamily::kCompute, kFamilyCompute},
                                {analysis::KernelFamily::kCommunication, kFamilyCommunication}}) {
      std::vector<double> us = analysis::IssueLatenciesUs(t, family);
      if (us.empty()) continue;
      run.issue_latency[name].AddAll(us);
      any = true;
    }
  }
  if (!vi.empty()) {
    run.void_inter.Add(analysis::Median(vi), vi.size());
    run.void_minority.Add(analysis::Median(vm), vm.size());
    any = true;
  }

  // GEMM TFLOPS per stable signature: median over the ranks that ran it.
  const uint64_t min_count = static_cast<uint64_t>(config_->Get("slow_gpu.min_count", v.backbone));
  std::map<std::string, std::pair<std::string, std::vector<double>>> gemm;
  std::map<std::string, uint64_t> gemm_count;
  for (const analysis::RankTrace& t : v.ranks) {
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      if (g.count < min_count || g.Tflops() <= 0) continue;
      const std::string stable = StableGemmKey(g.sig);
      auto& slot = gemm[stable];
      slot.first = GemmDtypeClass(g.sig.dtype);
      slot.second.push_back(g.Tflops());
      gemm_count[stable] += g.count;
    }
  }
  for (const auto& [key, g] : gemm) {
    auto& slot = run.gemm[key];
    slot.first = g.first;
    slot.second.Add(analysis::Median(g.second), gemm_count[key]);
    any = true;
  }

  // Collective busbw per shape: median over the communicators of the shape.
  std::map<CollectiveShape, std::vector<double>> bw;
  std::map<CollectiveShape, uint64_t> bw_count;
  for (const analysis::CommBandwidth& c : analysis::CommunicatorBandwidth(v.ranks)) {
    if (c.BusBw() <= 0) continue;
    CollectiveShape s{OpKindName(c.kind), c.bytes, c.nranks, static_cast<int32_t>(c.hosts.size())};
    bw[s].push_back(c.BusBw());
    bw_count[s] += c.count;
  }
  for (const auto& [s, values] : bw) {
    run.busbw[s].Add(analysis::Median(values), bw_count[s]);
    any = true;
  }

  if (!any) return;
  run.windows++;
  const int min_windows = static_cast<int>(config_->Get("history.baseline_windows", v.backbone));
  if (static_cast<int>(run.windows) < std::max(1, min_windows)) return;
  if (writer_) {
    writer_(Snapshot(job.job(), run, now_ns),
            static_cast<int>(config_->Get("history.runs", v.backbone)));
  }
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
