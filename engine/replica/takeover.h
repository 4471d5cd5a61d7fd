// takeover — what a replica loads from the database when it starts serving
// a job (a new job, one another replica served until it died or gave it
// up, or its own after a restart), so that nothing the previous owner
// committed is lost or done twice:
//   * the job's row and its ranks' record counts, carried on in JobState;
//   * per daemon stream, the last batch whose records the committed windows
//     hold: replays up to it are not applied again (ingest_service.h);
//   * the active diagnoses with their first_seen_ns, and which of them (and
//     of the resolutions) the webhook already delivered: the tracker goes
//     on with their episodes and announces only what was not delivered;
//   * the run's baseline so far, which the recorder continues.
// Thread-safety: LoadTakeover reads through the store's read connection
// (thread-safe); the result is a value.
#ifndef XPU_ENGINE_REPLICA_TAKEOVER_H_
#define XPU_ENGINE_REPLICA_TAKEOVER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/alerting/diagnosis_tracker.h"
#include "engine/history/baselines.h"
#include "engine/history/store.h"

namespace xpu::engine::replica {

struct JobTakeover {
  std::string job;
  std::optional<JobSummary> summary;            // none for a new job
  std::map<std::string, uint64_t> rank_records;  // process key -> records
  std::map<std::string, uint64_t> stream_seqs;   // stream -> committed batch_seq
  struct Active {
    Diagnosis diagnosis;
    bool firing_delivered = false;
  };
  std::vector<Active> active;
  std::vector<ResolvedDiagnosis> undelivered_resolutions;  // firing delivered, resolution not
  std::optional<history::RunBaseline> baseline;
};

absl::StatusOr<JobTakeover> LoadTakeover(history::Store& store, const std::string& job);

}  // namespace xpu::engine::replica

#endif  // XPU_ENGINE_REPLICA_TAKEOVER_H_
