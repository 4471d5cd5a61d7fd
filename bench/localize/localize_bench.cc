// localize_bench — the differential localization (PerfTracker's β/μ/σ
// patterns, the differential distance and the median/MAD rule,
// common/analysis/behavior_distance.h) over the window summaries of many
// workers, on one thread. Synthetic summaries: every worker runs the same
// functions (GEMMs, memory copies, collectives, Python functions) with a
// little jitter; one worker runs one GEMM at half speed with twice the
// critical-path time. Prints the time Localize takes and whether that worker
// and function, and nothing else, were named. localize_s is wall-clock time,
// localize_cpu_s the thread's CPU time (the same on an idle machine).
//
//   localize_bench [--workers N] [--functions F] [--seed S]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/analysis/behavior_distance.h"

namespace {

// CPU time of this thread: the figure that holds on a shared machine.
double ThreadCpuS() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

using xpu::analysis::FunctionClass;
using xpu::analysis::FunctionSummary;
using xpu::analysis::WorkerPatterns;

struct FunctionShape {
  std::string name;
  FunctionClass cls;
  double beta;      // share of the critical path
  uint64_t exec_ns; // one execution
  uint64_t executions;
};

std::vector<FunctionShape> Shapes(int n) {
  std::vector<FunctionShape> v;
  const FunctionClass classes[] = {FunctionClass::kGpuCompute, FunctionClass::kGpuCompute,
                                   FunctionClass::kCollective, FunctionClass::kMemory,
                                   FunctionClass::kPython};
  for (int i = 0; i < n; ++i) {
    const FunctionClass c = classes[i % 5];
    const double beta = c == FunctionClass::kPython ? 0.005 : c == FunctionClass::kCollective ? 0.1 : 0.6 / n;
    v.push_back({std::string(xpu::analysis::FunctionClassName(c)) + "_" + std::to_string(i), c,
                 beta, 200000u + 50000u * static_cast<uint64_t>(i), 64});
  }
  return v;
}

FunctionSummary Summary(const FunctionShape& s, double slow, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(1.0, 0.01);
  FunctionSummary f;
  f.name = s.name;
  f.cls = s.cls;
  const double per = static_cast<double>(s.exec_ns) * slow * jitter(rng);
  f.executions = s.executions;
  f.exec_ns = static_cast<uint64_t>(per * static_cast<double>(s.executions));
  f.min_exec_ns = static_cast<uint64_t>(per * 0.98);
  f.inv_exec_per_s = static_cast<double>(s.executions) / (per * 1e-9);
  f.beta = std::min(1.0, s.beta * slow * jitter(rng));
  f.critical_ns = static_cast<uint64_t>(f.beta * 1e10);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"localize_bench: the differential localization over N workers' window summaries, "
               "one thread; prints the time and whether the one slow worker was named"};
  size_t workers = 1000000;
  int functions = 10;
  uint64_t seed = 1;
  app.add_option("--workers", workers, "workers (ranks)")->check(CLI::Range(2ul, 100000000ul));
  app.add_option("--functions", functions, "functions per worker")->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "seed of the jitter");
  CLI11_PARSE(app, argc, argv);

  const std::vector<FunctionShape> shapes = Shapes(functions);
  const size_t culprit = workers / 3;
  std::mt19937_64 rng(seed);
  const auto b0 = std::chrono::steady_clock::now();
  std::vector<WorkerPatterns> in(workers);
  for (size_t w = 0; w < workers; ++w) {
    in[w].rank = static_cast<int32_t>(w);
    in[w].functions.reserve(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) {
      const double slow = (w == culprit && i == 0) ? 2.0 : 1.0;
      in[w].functions.push_back(Summary(shapes[i], slow, rng));
    }
  }
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = ThreadCpuS();
  const xpu::analysis::Localization loc = xpu::analysis::Localize(in);
  const double cpu = ThreadCpuS() - c0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool named = false;
  size_t others = 0;
  for (const auto& a : loc.abnormal) {
    if (a.worker == culprit && a.function == 0 && a.more_time && a.slower) {
      named = true;
    } else {
      ++others;
    }
  }
  printf("{\"workers\":%zu,\"functions\":%d,\"localize_s\":%.3f,\"localize_cpu_s\":%.3f,"
         "\"build_s\":%.2f,"
         "\"abnormal\":%zu,\"culprit_named\":%s,\"other_abnormal\":%zu}\n",
         workers, functions, s, cpu, build_s, loc.abnormal.size(), named ? "true" : "false", others);
  return named && others == 0 ? 0 : 1;
}
