#include "common/analysis/behavior_distance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "common/analysis/stats.h"

namespace xpu::analysis {
namespace {

double OutsideBy(double x, double lo, double hi) {
  if (x < lo) return lo - x;
  if (x > hi) return x - hi;
  return 0;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

ExpectedRange ExpectationFor(FunctionClass c, const LocalizationOptions& o) {
  ExpectedRange r;
  if (c == FunctionClass::kPython) r.beta_hi = o.python_beta_hi;
  if (c == FunctionClass::kCollective) r.beta_hi = o.collective_beta_hi;
  return r;
}

double DistanceFromExpectation(const Pattern& p, const ExpectedRange& r) {
  // The box is a product of intervals: the nearest point clamps each
  // coordinate, so the Manhattan distance is the sum of the per-dimension gaps.
  return OutsideBy(p.beta, r.beta_lo, r.beta_hi) + OutsideBy(p.mu, r.mu_lo, r.mu_hi) +
         OutsideBy(p.sigma, r.sigma_lo, r.sigma_hi);
}

std::vector<Pattern> MaxNormalize(const std::vector<Pattern>& v) {
  Pattern mx;
  for (const Pattern& p : v) {
    mx.beta = std::max(mx.beta, p.beta);
    mx.mu = std::max(mx.mu, p.mu);
    mx.sigma = std::max(mx.sigma, p.sigma);
  }
  // sigma is a dispersion of the pace: on the pace's scale (behavior_distance.h).
  const double sigma_scale = std::max(mx.sigma, mx.mu);
  std::vector<Pattern> out;
  out.reserve(v.size());
  for (const Pattern& p : v) {
    out.push_back(Pattern{mx.beta > 0 ? p.beta / mx.beta : 0, mx.mu > 0 ? p.mu / mx.mu : 0,
                          sigma_scale > 0 ? p.sigma / sigma_scale : 0});
  }
  return out;
}

double Manhattan(const Pattern& a, const Pattern& b) {
  return std::fabs(a.beta - b.beta) + std::fabs(a.mu - b.mu) + std::fabs(a.sigma - b.sigma);
}

std::vector<double> DifferentialDistances(const std::vector<Pattern>& normalized, double delta,
                                          size_t sample, uint64_t seed) {
  const size_t w = normalized.size();
  std::vector<double> out(w, 0);
  if (w == 0) return out;
  std::vector<size_t> peers(w);
  std::iota(peers.begin(), peers.end(), 0);
  if (sample > 0 && w > sample) {
    std::mt19937_64 rng(seed);
    std::shuffle(peers.begin(), peers.end(), rng);
    peers.resize(sample);
  }
  const double n = static_cast<double>(peers.size());
  for (size_t i = 0; i < w; ++i) {
    size_t differ = 0;
    for (size_t j : peers) differ += Manhattan(normalized[i], normalized[j]) < delta ? 0 : 1;
    out[i] = static_cast<double>(differ) / n;
  }
  return out;
}

Localization Localize(const std::vector<WorkerPatterns>& workers, const LocalizationOptions& o) {
  Localization out;
  // Every (class, name) some worker ran, with each worker's summary.
  std::map<std::pair<FunctionClass, std::string>, std::vector<const FunctionSummary*>> table;
  for (size_t w = 0; w < workers.size(); ++w) {
    for (const FunctionSummary& f : workers[w].functions) {
      auto& row = table[{f.cls, f.name}];
      if (row.empty()) row.assign(workers.size(), nullptr);
      row[w] = &f;
    }
  }
  const FunctionSummary kNotRun;
  for (const auto& [key, row] : table) {
    FunctionAnalysis fa;
    fa.cls = key.first;
    fa.name = key.second;
    for (const FunctionSummary* s : row) {
      if (s != nullptr && s->executions > 0 && s->min_exec_ns > 0) {
        fa.reference_ns =
            fa.reference_ns == 0 ? s->min_exec_ns : std::min(fa.reference_ns, s->min_exec_ns);
      }
    }
    const ExpectedRange range = ExpectationFor(fa.cls, o);
    std::vector<double> betas, mus;
    for (const FunctionSummary* s : row) {
      Pattern p = PatternOf(s != nullptr ? *s : kNotRun, fa.reference_ns);
      fa.patterns.push_back(p);
      fa.D.push_back(DistanceFromExpectation(p, range));
      betas.push_back(p.beta);
      mus.push_back(p.mu);
    }
    fa.normalized = MaxNormalize(fa.patterns);
    fa.Delta = DifferentialDistances(fa.normalized, o.delta, o.sample, Fnv1a(fa.name));
    fa.M = Median(fa.Delta);
    fa.MAD = Mad(fa.Delta);
    fa.beta_median = Median(betas);
    fa.mu_median = Median(mus);
    const size_t fi = out.functions.size();
    for (size_t w = 0; w < row.size(); ++w) {
      const Pattern& p = fa.patterns[w];
      if (!(p.beta > o.min_beta)) continue;
      AbnormalExecution a;
      a.function = fi;
      a.worker = w;
      a.by_expectation = fa.D[w] > 0;
      a.by_difference = fa.Delta[w] > fa.M + o.k * fa.MAD;
      if (!a.by_expectation && !a.by_difference) continue;
      a.more_time = p.beta > fa.beta_median * (1 + o.min_change) &&
                    p.beta - fa.beta_median > o.min_excess_beta;
      a.slower = p.mu < fa.mu_median * (1 - o.min_change) && fa.mu_median > 0 &&
                 p.beta * (1 - p.mu / fa.mu_median) > o.min_excess_beta;
      out.abnormal.push_back(a);
    }
    out.functions.push_back(std::move(fa));
  }
  return out;
}

}  // namespace xpu::analysis
