// engine/hang/rank_evidence.h — the evidence of one hang diagnosis, put
// together: what the engine itself knows about each process of the job
// (copied under the job's lock: liveness, progress table, open host
// intervals, how long ago it last made progress, the collectives its
// communicators completed), the daemons' answers to the "evidence" command
// (fanned out to every daemon of the job at once, within a deadline), and
// both merged into the classifier's RankEvidence and the report's per-rank
// lines.
//
// Thread-safety: free functions; SnapshotJob takes the job's lock itself.
#ifndef XPU_ENGINE_HANG_RANK_EVIDENCE_H_
#define XPU_ENGINE_HANG_RANK_EVIDENCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/hang/classify.h"
#include "engine/hang/report.h"
#include "engine/state/command.h"
#include "engine/state/job_state.h"

namespace xpu::engine::hang {

// What the engine itself knows about one process.
struct ProcessSnapshot {
  std::string key;
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string daemon_id;
  Liveness liveness = Liveness::kAlive;
  bool has_progress = false;
  xpu::v1::HangProgress progress;
  std::vector<OpenInterval> open;
  uint64_t last_progress_rx_ns = 0;  // engine clock, 0 never
  // At the snapshot, the span the engine had not seen of the process yet
  // (now - ProcessState::SeenUntilNs): not counted in its progress's age.
  uint64_t unseen_ns = 0;
};

struct JobSnapshot {
  std::vector<ProcessSnapshot> procs;
  // The collectives the communicators with an outstanding one completed
  // recently (classify.h ClassifyContext::completed).
  std::map<uint64_t, std::map<uint32_t, std::pair<uint32_t, uint64_t>>> completed;
};

// Copies what the classification needs out of `job` (null: empty) under its
// lock, at `now_ns` (engine clock).
JobSnapshot SnapshotJob(JobState* job, uint64_t now_ns);

// The daemons' evidence, by (host, pid) of the process.
using EvidenceByProcess = std::map<std::pair<std::string, int32_t>, xpu::v1::ProcessEvidence>;

// Sends the evidence command (mode "quick" or "" = full) to every daemon of
// the job, all at once, and waits up to the deadline (+3 s) for the
// answers. A daemon that does not answer in time, fails or sends unreadable
// evidence is logged and left out; `report` counts the daemons asked and
// answered and the time it took.
EvidenceByProcess GatherEvidence(const CommandSender& send, const std::string& job_name,
                                 const std::vector<ProcessSnapshot>& procs, uint64_t deadline_ms,
                                 const std::string& mode, const xpu::v1::CommandCaller& caller,
                                 HangReport* report);

// A later pass's evidence completed with an earlier one's: the Python
// stacks, thread states and CPU sample of the quick pass where the full
// pass has none.
void MergeEarlierEvidence(const EvidenceByProcess& earlier, EvidenceByProcess* later);

// The classifier's view of every process and the report's lines: the
// snapshot completed with the daemons' evidence; `now_ns` (engine clock)
// and `threshold_ns` decide which ranks still make progress.
std::vector<RankEvidence> AssembleRanks(const JobSnapshot& snap,
                                        const EvidenceByProcess& evidence, uint64_t now_ns,
                                        uint64_t threshold_ns, HangReport* report);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_RANK_EVIDENCE_H_
