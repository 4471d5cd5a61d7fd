// engine/hang/step_pattern.cc — see step_pattern.h.
#include "engine/hang/step_pattern.h"

#include <vector>

#include "common/analysis/steps.h"

namespace xpu::engine::hang {
namespace {
// Enough for several steps of a large model's per-layer collectives.
constexpr size_t kMaxHistory = 1024;
}  // namespace

Expectation ExpectedAt(const std::map<uint32_t, OpShape>& completed, uint32_t seq) {
  Expectation e;
  // The consecutive run of seqs right before `seq`.
  std::vector<OpShape> run;  // newest first
  for (uint32_t s = seq - 1; s != 0 && run.size() < kMaxHistory; --s) {
    auto it = completed.find(s);
    if (it == completed.end()) break;
    run.push_back(it->second);
  }
  e.history = run.size();
  if (run.empty()) {
    e.why_not = "no completed collective right before it on this communicator";
    return e;
  }
  std::vector<uint64_t> symbols(run.size());
  std::map<OpShape, uint64_t> ids;
  for (size_t i = 0; i < run.size(); ++i) {
    // Oldest first for the period search.
    const OpShape& shape = run[run.size() - 1 - i];
    symbols[i] = ids.emplace(shape, ids.size()).first->second;
  }
  e.period = analysis::SequencePeriod(symbols, 0.9, 3);
  if (e.period == 0) {
    e.why_not = "no repeating per-step pattern in the " + std::to_string(run.size()) +
                " collectives before it";
    return e;
  }
  // seq - k*P is run[k*P - 1] (run is newest first, run[0] = seq - 1).
  std::map<OpShape, int> votes;
  for (size_t k = 1; k * e.period <= run.size(); ++k) {
    ++votes[run[k * e.period - 1]];
    ++e.occurrences;
  }
  for (const auto& [shape, n] : votes) {
    if (n > e.votes) {
      e.votes = n;
      e.shape = shape;
    }
  }
  if (e.occurrences < 2 || 3 * e.votes < 2 * e.occurrences) {
    e.why_not = "the per-step pattern (period " + std::to_string(e.period) +
                ") does not agree on what comes at this position";
    return e;
  }
  e.known = true;
  return e;
}

}  // namespace xpu::engine::hang
