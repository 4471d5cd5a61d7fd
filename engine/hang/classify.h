// engine/hang/classify.h — from the evidence of every rank of a hung job to
// a verdict: what kind of hang, which ranks (and hosts) are the culprits,
// which team acts on it.
//
// Order of the rules (first match wins):
//  1. crash          a rank is gone / zombie / exited while others wait or
//                    make no progress (operations);
//  2. process state  a rank is stopped (SIGSTOP, 'T') or in uninterruptible
//                    sleep ('D': I/O, storage, driver): non-communication
//                    hang, operations;
//  3. stuck kernel   a rank's oldest outstanding GPU op is a kernel (not a
//                    collective) far beyond its usual duration: the kernel
//                    never completes (a faulty GPU or driver, or a kernel
//                    that does not terminate), named with its stream:
//                    non-communication, operations. Not a kernel whose
//                    rank is inside a collective issued after it, or waits
//                    in one that a peer never issued: its completion mark
//                    may be queued behind the collective, and the hang is
//                    about the collective (rules 5 to 7);
//  4. busy-wait      the ranks not in the collective are inside an open
//                    host interval such as a checkpoint save, or still make
//                    progress (evaluation on one rank), while the others
//                    wait for them: not a fault, reported with the busy ranks;
//  5. mismatch       at the sequence number the communicator is stuck on,
//                    ranks issued a different op kind or size (algorithm);
//                    the culprits are those whose op differs from what the
//                    job's own repeating per-step pattern of collectives
//                    expects at that number (step_pattern.h), or the
//                    minority; when neither tells them apart, every group
//                    is named and the reason says so;
//  6. missing        ranks never issued the collective the others wait in
//                    and sit in non-communication code: non-communication
//                    hang, algorithm team (the paper's "stuck rank"), with
//                    where they sit (stall_site.h: Python, data loading,
//                    native code);
//  7. communication  every rank issued the same collective and is stuck
//                    inside it: intra-kernel ring progress (cuda-gdb step
//                    counters, or the test runtime's) names the link where
//                    progress stops (operations: the link, its NICs or
//                    GPUs); not located: infrastructure;
//  Rules 2 and 6 also read the ring progress of the ranks inside the kernel
//  (LocateOnRings): when it stops behind a culprit, the verdict says so, so
//  the culprit is named by the data flow and not only by its state or
//  absence.
//  8. outside        no rank waits in a collective and ranks make no
//                    progress (a one-process job, or every rank stuck in
//                    Python, data loading or native code): non-communication,
//                    algorithm, with where each one sits;
//  9. stacks only    without progress tables: ranks whose stacks hold no
//                    communication frame while others' do are culprits.
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_CLASSIFY_H_
#define XPU_ENGINE_HANG_CLASSIFY_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/hang/stacks.h"

namespace xpu::engine::hang {

struct CommState {
  uint64_t comm_id = 0;
  uint32_t last_issued = 0;
  uint32_t last_completed = 0;
  uint32_t pending_seq = 0;   // 0: nothing outstanding
  uint32_t pending_kind = 0;  // xpu_op_kind
  uint64_t pending_bytes = 0;
  uint64_t pending_since_ns = 0;
  std::string pending_name;
  int32_t comm_rank = -1;
  int32_t comm_nranks = 0;
};

struct OpenInterval {
  uint32_t kind = 0;  // xpu_op_kind, e.g. XPU_OP_PY_CHECKPOINT
  std::string name;
  uint64_t since_ns = 0;
};

// Progress inside a collective's kernel on one rank (ring step counters).
struct KernelProgress {
  std::string channel;    // communicator / channel identity
  int32_t ring_pos = -1;  // position in the ring (comm rank for a plain ring)
  int32_t ring_size = 0;
  int32_t prev_rank = -1;  // rank of the ring predecessor; -1: the one at ring_pos - 1
  int32_t next_rank = -1;  // rank of the ring successor (-1 unknown)
  uint64_t seq = 0;        // collective the counters belong to
  uint64_t completed_seq = 0;
  uint64_t step = 0;  // received from the predecessor
  uint64_t sent = 0;  // consumed by the successor (cuda-gdb; 0 unknown)
  uint64_t steps_total = 0;
  std::string source;
};

// The hook's overdue op (its hang watch's suspect block).
struct OverdueOp {
  bool set = false;
  uint32_t kind = 0;  // xpu_op_kind
  uint32_t seq = 0;
  uint32_t stream = 0;
  uint64_t since_ns = 0;  // launch (host clock)
  uint64_t threshold_ns = 0;
  uint64_t comm_id = 0;  // 0: not a collective
  std::string name;
};

struct RankEvidence {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string proc_state;  // process_probe.h names; "unknown" without evidence
  bool exited = false;     // reported exited by its daemon
  bool answered = true;    // its daemon answered the evidence command
  std::vector<ThreadStack> native;
  std::vector<ThreadStack> python;
  std::string native_error, python_error;
  bool has_progress = false;
  std::vector<CommState> comms;
  std::vector<OpenInterval> open;
  std::vector<KernelProgress> kernel;
  std::string gpu_health;
  OverdueOp overdue;
  std::string threads;  // "tid name state wchan" lines, main thread first
  double cpu_busy = -1;  // CPUs the process used over a short sample, -1 unknown
  // Engine clock: how long ago the rank's last progress record arrived (-1
  // unknown), and whether that is within the job's no-progress threshold.
  int64_t progress_age_ns = -1;
  bool progressing = false;
  // Its daemon did not answer, and the engine has not read all that the
  // daemon sent of it (an ingest backlog: ProcessSnapshot::unseen_ns): its
  // progress table may be older than the ranks' waits. Such a rank is not
  // named for never issuing a collective.
  bool table_behind = false;
};

// What the classification knows besides the ranks' evidence.
struct ClassifyContext {
  // Per communicator, seq -> (kind, bytes) of the collectives it completed
  // recently (the engine's collective table): the job's own per-step
  // pattern, against which a mismatch's culprit is decided.
  std::map<uint64_t, std::map<uint32_t, std::pair<uint32_t, uint64_t>>> completed;
  uint64_t now_ns = 0;  // host clock, for ages of overdue ops
};

enum class HangClass { kNone, kCommunication, kNonCommunication, kMismatch, kCrash, kBusyWait };
const char* HangClassName(HangClass c);

struct Verdict {
  HangClass cls = HangClass::kNone;
  std::string team;  // "operations" / "infrastructure" / "algorithm" / "" (none)
  std::vector<int32_t> culprits;
  std::vector<std::string> hosts;    // of the culprits
  std::string reason;                // one line
  std::vector<std::string> details;  // evidence lines
  // The ring link where intra-kernel progress stops, as "a->b", and the
  // ranks it names (the sender alone when it was not inside the kernel).
  std::string faulty_link;
  std::vector<int32_t> ring_named;
  uint64_t comm_id = 0;
  uint32_t stuck_seq = 0;
  // No verdict yet (cls kNone): the ranks that seem not to have issued the
  // stuck collective are known only from tables the engine has not caught
  // up on (RankEvidence::table_behind). The monitor looks again shortly.
  bool evidence_behind = false;
};

// Where intra-kernel progress stops, over every ring channel the ranks'
// KernelProgress covers. Per channel: the read rank that received least in
// the running kernel is right behind the stall, and the link is its
// predecessor -> it (among equals, one whose predecessor was not read, else
// the largest drop); when receiving is uniform, the rank whose successor
// consumed least (`sent`) is right before it. Channels vote for an end that
// was not read (each channel's ring gives it other neighbours), else for
// the link; `link` is empty when no channel singles one out.
struct RingFinding {
  std::string link;            // one link of the winner, "a->b"
  std::string links;           // all its links, "1->2, 0->1"
  int32_t from = -1, to = -1;  // the named rank alone (to -1), or the link's ends
  bool from_read = false;      // a link between two read ranks
  int channels = 0;            // channels with >= 2 ranks read
  int agree = 0;               // of them, naming `link`
  std::vector<std::string> lines;
};
RingFinding LocateOnRings(const std::vector<RankEvidence>& ranks);

// Along one ring (progress indexed by ring position), the position whose
// predecessor progressed further than it did: data stopped on the link
// predecessor -> position. Returns -1 when progress is uniform (no link
// stands out). Pure. The verdicts use LocateOnRings, which also handles
// members that were not read and the send side; this is the plain rule for
// a whole ring of one metric.
int FindStalledLink(const std::vector<uint64_t>& progress_by_pos);

Verdict Classify(const std::vector<RankEvidence>& ranks, const ClassifyContext& context = {});

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_CLASSIFY_H_
