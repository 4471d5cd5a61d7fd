// engine/hang/step_pattern.h — what a communicator's own history says a
// collective should be: the job's repeating per-step pattern of collectives.
//
// A training step issues the same collectives in the same order every step,
// so the (kind, bytes) sequence a communicator completed repeats with the
// step's period P. The collective expected at sequence number s is then the
// one at s - P (and s - 2P, ...: the occurrences vote). At a mismatch, the
// ranks whose collective at the diverging number differs from the expected
// one added, dropped or reordered a collective; those that issued the
// expected one did not, however far ahead they enqueued.
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_STEP_PATTERN_H_
#define XPU_ENGINE_HANG_STEP_PATTERN_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace xpu::engine::hang {

// (xpu_op_kind, bytes) of a collective.
using OpShape = std::pair<uint32_t, uint64_t>;

struct Expectation {
  bool known = false;
  OpShape shape;
  size_t period = 0;     // collectives per step
  size_t history = 0;    // consecutive completed collectives it was learnt from
  int votes = 0;         // occurrences at s - kP that agree
  int occurrences = 0;   // occurrences at s - kP available
  std::string why_not;   // when !known
};

// The expected collective at `seq` from `completed` (seq -> shape, the
// collectives completed before it; gaps end the usable history). Needs at
// least 3 periods of history and a clear vote (at least 2/3 of the earlier
// occurrences, and at least 2 of them).
Expectation ExpectedAt(const std::map<uint32_t, OpShape>& completed, uint32_t seq);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_STEP_PATTERN_H_
