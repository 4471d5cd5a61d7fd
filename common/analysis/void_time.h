// void_time — the void percentages of XPUTimer §5.2.2, host-event time
// shares and issue-latency samples of one rank.
//
// V_inter = T_inter / T_step. T_inter per step is the GPU idle time around
// the step's inter-step CPU work: with DataLoader events, from the end of
// the last GPU op before the DataLoader call to the start of the first GPU
// op after it (the paper's definition); without them, the GPU-idle gap that
// contains the step boundary.
//
// V_minority = T_minority / (T_step - T_inter). Untraced ("minority")
// kernels are invisible, but they leave a trace: on one stream, a gap between
// two consecutive traced compute ops (kernel/GEMM) during which the later op
// had already been launched by the CPU (launch = start - issue latency <=
// end of the earlier op) means the GPU was busy with something we did not
// trace — not waiting for the host. T_minority sums those gaps. Gaps whose
// later op has no valid issue latency are not counted (we cannot tell host
// starvation from hidden work), nor are gaps next to a collective on the
// same stream; when a collective on another stream of the rank ends inside
// the gap, only the part after that end counts (the op may have waited for
// it through an event). While traced compute ops of another stream of the
// rank run inside such a gap (GEMMs on a second stream that occupy the
// GPU), that part is traced work, not minority time: it goes to cross_s.
// Only GPU-timed ops bound a gap; the sampler's completion-tracked
// occurrences (XPU_REC_NOT_TIMED) launched on the stream between the two
// ran inside it: each takes the mean GPU time of its signature's timed
// occurrences in the trace out of the gap, and one whose signature has
// none takes all of the gap up to its observed completion (an upper
// bound). This is an estimate from the traced data only; it never counts
// host starvation or traced work as minority time.
//
// Pauses: a step longer than kPauseFactor x the median step of the span
// (a checkpoint, an evaluation, a stopped process, or a window that holds
// the end of one burst of steps and the start of the next) is not a
// training step: it is left out of both void figures and counted in
// `pauses`. Needs at least three steps in the span.
//
// Sync cost (SyncIdle): after a synchronization returns, the host must
// refill an empty queue; the GPU idles from the later of the return and the
// end of the GPU work still running (on any stream) until the host's next
// launch (or the next op's start, if earlier). Those gaps, each counted
// once however many syncs end before it, are what synchronizations cost the
// step. A gap that contains a step boundary or a DataLoader call is
// inter-step time (V_inter), not a sync cost; with steps from the
// collective period and no DataLoader events (no mark of where the loop
// ends a step), the longest such gap of each step is taken for it. Untraced kernels launched after the return shorten the
// real gap; the figure is then an upper bound.
#ifndef XPU_COMMON_ANALYSIS_VOID_TIME_H_
#define XPU_COMMON_ANALYSIS_VOID_TIME_H_

#include <cstdint>
#include <vector>

#include "common/analysis/steps.h"
#include "common/analysis/trace.h"

namespace xpu::analysis {

struct VoidFigures {
  size_t steps = 0;
  double step_s = 0;        // sum of the step times considered
  double inter_s = 0;       // T_inter
  double minority_s = 0;    // T_minority
  double cross_s = 0;       // queued waits covered by traced compute ops of other streams
  double dataloader_s = 0;  // DataLoader host time within those steps
  bool inter_from_dataloader = false;
  size_t pauses = 0;   // steps left out as pauses (see above)
  double pause_s = 0;  // their time
  double VInter() const { return step_s > 0 ? inter_s / step_s : 0; }
  double VMinority() const { return step_s - inter_s > 0 ? minority_s / (step_s - inter_s) : 0; }
};
// Over the complete steps of `steps` whose start is in [from_ns, to_ns).
VoidFigures ComputeVoid(const RankTrace& t, const Steps& steps, uint64_t from_ns = 0,
                        uint64_t to_ns = UINT64_MAX);

// A step longer than this multiple of the span's median step is a pause.
inline constexpr double kPauseFactor = 5.0;

// GPU idle time after synchronization returns within the complete steps of
// `steps` (see "Sync cost" above).
struct SyncIdle {
  uint64_t gaps = 0;    // distinct idle gaps that follow a sync return
  double idle_s = 0;    // their total length
};
SyncIdle ComputeSyncIdle(const RankTrace& t, const Steps& steps);

// Host time of events of `kind` (e.g. XPU_OP_PY_DATALOADER, XPU_OP_PY_GC)
// with start in [from_ns, to_ns), and their number.
struct HostTime {
  uint64_t count = 0;
  double seconds = 0;
};
HostTime HostEventTime(const RankTrace& t, uint16_t kind, uint64_t from_ns = 0,
                       uint64_t to_ns = UINT64_MAX);
// All synchronization events (XPU_OP_SYNC_*, XPU_OP_PY_SYNC). A sync that
// lies inside an earlier one's interval (the cudaDeviceSynchronize under a
// torch.cuda.synchronize) is the same wait: counted once, and the time is
// the union of the intervals.
HostTime SyncTime(const RankTrace& t, uint64_t from_ns = 0, uint64_t to_ns = UINT64_MAX);

enum class KernelFamily { kCompute, kCommunication };
// Issue latencies in microseconds of ops of the family with a valid issue
// latency and start in [from_ns, to_ns).
std::vector<double> IssueLatenciesUs(const RankTrace& t, KernelFamily f, uint64_t from_ns = 0,
                                     uint64_t to_ns = UINT64_MAX);

}  // namespace xpu::analysis

#endif  // XPU_COMMON_ANALYSIS_VOID_TIME_H_
