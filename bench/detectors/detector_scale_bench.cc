// detector_scale_bench — what each slowdown detector costs per rank as a job
// grows: the engine's detectors (AddSlowdownDetectors) run one at a time on
// the windows of xpu-sim's cluster model (tools/sim/cluster_model.h) at each
// rank count, with the records put into a real JobState as the ingest puts
// them and windows closed as the engine's tick closes them. No gRPC and no
// real time: the figure is the window tick's detector work alone, the CPU
// time of the process (a detector that splits its work into threads, as the
// kernel-issue-stall one does in a large job, is charged for all of them).
//
// Prints, per rank count, every detector's CPU time per rank per window
// (windows after the first: the first fills baselines), then per detector
// the ratio of its figure at the largest rank count to its figure at the
// smallest. A detector whose cost per rank grows with the rank count is
// superlinear; the engine's goal is flat (within 2x) from 8 to 100k ranks
// (docs/scale.md). The view build ("window view") and the per-rank figures
// the view finds once for every detector ("rank figures": steps, void and
// GEMM figures, and the communicators' bandwidth) are measured as well.
//
//   detector_scale_bench [--ranks 1000,4000,16000] [--windows 3]
//                        [--fault slow_gpu:RANK[:WINDOW]]... [--layout dp]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/detectors/slowdown_detectors.h"
#include "engine/testing/detector_testing.h"
#include "tools/sim/cluster_model.h"
#include "tools/sim/fault.h"

namespace {

using xpu::engine::Detector;
using xpu::engine::WindowViews;
using xpu::engine::testing::TestJob;

double CpuS() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU µs per rank per window of each step ("window view", the detectors by
// name) at one rank count, and the diagnoses' kinds of the last window.
struct SizeResult {
  std::map<std::string, double> us_per_rank;
  std::vector<std::string> diagnoses;
};

SizeResult RunSize(int32_t ranks, int windows, const std::string& layout,
                   const std::vector<std::string>& fault_texts) {
  xpu::sim::ModelSpec spec;
  spec.ranks = ranks;
  absl::StatusOr<xpu::sim::Layout> l = xpu::sim::ParseLayout(layout, ranks, spec.ranks_per_host);
  if (!l.ok()) {
    fprintf(stderr, "detector_scale_bench: %s\n", std::string(l.status().message()).c_str());
    exit(2);
  }
  spec.layout = *l;
  for (const std::string& f : fault_texts) {
    absl::StatusOr<xpu::sim::FaultSpec> fs = xpu::sim::ParseFault(f, ranks);
    if (!fs.ok()) {
      fprintf(stderr, "detector_scale_bench: %s\n", std::string(fs.status().message()).c_str());
      exit(2);
    }
    spec.faults.push_back(*fs);
  }
  xpu::sim::ClusterModel model(spec);
  TestJob job(spec.job_name, spec.job);
  for (int32_t r = 0; r < ranks; ++r) {
    xpu::v1::ProcessBatch pb;
    model.AppendSignatures(r, &pb);
    const std::string host = model.HostName(model.HostOf(r));
    job.Rank(r, host, spec.gpu_model);
    for (const xpu::v1::Signature& s : pb.signatures()) job.Define(r, s);
  }
  auto config = std::make_shared<xpu::engine::DetectorConfig>();
  std::vector<std::unique_ptr<Detector>> detectors;
  std::shared_ptr<WindowViews> views = xpu::engine::AddSlowdownDetectors(config, &detectors);
  SizeResult out;
  constexpr uint64_t kWindowNs = 30ull * 1000000000ull;
  for (int w = 0; w < windows; ++w) {
    model.RunWindow(w, job.now() + 1000000);
    for (int32_t r = 0; r < ranks; ++r) job.Add(r, model.Records(r));
    job.CloseWindow(kWindowNs);
    std::map<std::string, double> spent;
    double t = CpuS();
    const xpu::engine::WindowView& view = views->BuildAndTrim(job.state());
    spent["window view"] = CpuS() - t;
    t = CpuS();
    view.FindAll(1);  // as the engine's tick does before the detectors
    spent["rank figures"] = CpuS() - t;
    xpu::engine::VectorSink sink;
    for (auto& d : detectors) {
      t = CpuS();
      d->OnWindow(job.state(), sink);
      spent[std::string(d->name())] = CpuS() - t;
    }
    views->Release(spec.job);
    job.state().TrimRings();
    if (w == 0 && windows > 1) continue;  // baselines fill
    const double n = windows > 1 ? windows - 1 : 1;
    for (const auto& [what, s] : spent) out.us_per_rank[what] += s * 1e6 / ranks / n;
    out.diagnoses.clear();
    for (const xpu::engine::Diagnosis& d : sink.out) out.diagnoses.push_back(d.kind);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "detector_scale_bench: each slowdown detector's CPU time per rank per window at several "
      "rank counts (the process's CPU time, one detector at a time), from xpu-sim's cluster model; "
      "and the ratio of the largest "
      "rank count's figure to the smallest's (1 is linear in the ranks)."};
  std::string ranks_text = "1000,4000,16000", layout = "dp";
  int windows = 3;
  std::vector<std::string> faults;
  app.add_option("--ranks", ranks_text, "rank counts, comma-separated")->capture_default_str();
  app.add_option("--windows", windows, "windows per rank count (the first fills baselines)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--layout", layout, "xpu-sim layout: dp or tpXppY")->capture_default_str();
  app.add_option("--fault", faults, "xpu-sim fault KIND:RANKS[:AT_WINDOW] (repeatable)");
  CLI11_PARSE(app, argc, argv);
  std::vector<int32_t> sizes;
  for (absl::string_view s : absl::StrSplit(ranks_text, ',', absl::SkipEmpty())) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 2) {
      fprintf(stderr, "detector_scale_bench: --ranks: '%s' is not a rank count of 2 or more\n",
              std::string(s).c_str());
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) {
    fprintf(stderr, "detector_scale_bench: --ranks: no rank count\n");
    return 2;
  }
  std::sort(sizes.begin(), sizes.end());
  std::vector<SizeResult> results;
  for (int32_t n : sizes) {
    fprintf(stderr, "detector_scale_bench: %d ranks, %d windows...\n", n, windows);
    results.push_back(RunSize(n, windows, layout, faults));
    const SizeResult& r = results.back();
    double total = 0;
    for (const auto& [what, us] : r.us_per_rank) total += us;
    printf("ranks %d: %.2f us per rank per window in all", n, total);
    for (const auto& [what, us] : r.us_per_rank) printf("; %s %.2f", what.c_str(), us);
    printf("; diagnoses of the last window:");
    for (const std::string& d : r.diagnoses) printf(" %s", d.c_str());
    printf("%s\n", r.diagnoses.empty() ? " none" : "");
  }
  if (sizes.size() >= 2) {
    printf("ratio %d/%d ranks of the cost per rank:", sizes.back(), sizes.front());
    for (const auto& [what, us] : results.back().us_per_rank) {
      const double base = results.front().us_per_rank[what];
      if (base > 0) printf(" %s %.2f;", what.c_str(), us / base);
    }
    printf("\n");
  }
  return 0;
}
