// job_state — the engine's in-memory picture of one job, kept for analyses:
// per process (rank) a bounded ring of recent records and its signatures, the
// collective table keyed by (comm_id, seq), communicators, and the current
// window's accumulators, closed into WindowSummary rows by the window tick.
//
// Thread-safety: every member of JobState and of the ProcessStates it owns is
// guarded by mu(). Ingest threads take it once per ProcessBatch (not per
// record); the window tick takes it to close a window and run detectors, which
// therefore see a consistent snapshot.
#ifndef XPU_ENGINE_STATE_JOB_STATE_H_
#define XPU_ENGINE_STATE_JOB_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/record/op_kind.h"
#include "engine/state/batch_decoder.h"
#include "engine/state/collective_table.h"
#include "xpu/record.h"
#include "xpu/v1/common.pb.h"

namespace xpu::engine {

enum class Liveness { kAlive, kSilent, kExited };
std::string_view LivenessName(Liveness l);
// Op kinds are named by the shared table (common/record/op_kind.h):
// "allreduce", "gemm", ..., "op<N>" when unknown.
using ::xpu::record::OpKindName;

// Bounded ring of the most recent records of one process.
class RecordRing {
 public:
  explicit RecordRing(size_t capacity) : buf_(capacity ? capacity : 1) {}
  void Append(const xpu_record_v1* r, size_t n);
  // Up to n most recent records, oldest first.
  std::vector<xpu_record_v1> Last(size_t n) const;
  uint64_t written() const { return written_; }
  size_t capacity() const { return buf_.size(); }

 private:
  std::vector<xpu_record_v1> buf_;
  uint64_t written_ = 0;
};

// Record counts by op family within a window ("step-less": no step
// boundaries are needed to compute them).
struct KindCounts {
  uint64_t kernel = 0, gemm = 0, collective = 0, memcpy = 0, sync = 0, host = 0, other = 0;
  void Add(uint16_t kind);
  void Merge(const KindCounts& o);
};

struct GemmAccum {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  double flops = 0;
};

// One process of the job: a rank, or a rank-less process keyed by pid@host.
struct ProcessState {
  ProcessState(std::string k, size_t ring_capacity) : key(std::move(k)), ring(ring_capacity) {}
  std::string key;  // "rank:<n>" or "pid:<pid>@<host>"
  xpu::v1::ProcessIdentity identity;
  std::string daemon_id;
  SignatureTable sigs;
  RecordRing ring;
  Liveness liveness = Liveness::kAlive;
  uint64_t first_seen_ns = 0;
  uint64_t last_seen_ns = 0;       // engine clock: last batch for this process
  uint64_t last_record_rx_ns = 0;  // engine clock: last batch with records
  uint64_t last_record_ns = 0;     // host clock: latest record end
  uint64_t records = 0;
  uint64_t unknown_sig = 0;
  uint64_t dropped = 0;  // hook + daemon drops (cumulative, reported)
  xpu::v1::ProcessCounters counters;
  std::deque<xpu::v1::WindowSummary> daemon_windows;  // bounded
  // Current window.
  uint64_t window_records = 0;
  KindCounts window_kinds;
  std::vector<GemmAccum> window_gemm;  // by sig_id, grown on demand
};

struct Communicator {
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  std::map<int32_t, int32_t> members;  // comm_rank -> global rank
};

struct GemmWindowRow {
  std::string signature;  // "name m x n x k x batch dtype"
  uint64_t count = 0;
  uint64_t total_ns = 0;
  double flops = 0;
  double Tflops() const {
    return total_ns ? flops / (static_cast<double>(total_ns) * 1e-9) / 1e12 : 0;
  }
};
struct CollectiveWindowRow {
  std::string op;
  OpBandwidth bw;
};
struct WindowSummaryRow {
  std::string job;
  uint64_t window_start_ns = 0;
  uint64_t window_end_ns = 0;
  uint64_t records = 0;
  KindCounts kinds;
  std::vector<GemmWindowRow> gemm;
  std::vector<CollectiveWindowRow> collectives;
};

class JobState {
 public:
  JobState(std::string job, std::string job_name, size_t ring_capacity, uint64_t now_ns);

  std::mutex& mu() const { return mu_; }
  const std::string& job() const { return job_; }

  // All below: caller holds mu().
  // Finds or creates the process for `id`. A rank whose pid or host changed
  // is a new incarnation: its signatures are reset.
  ProcessState& GetOrCreateProcess(const xpu::v1::ProcessIdentity& id, const std::string& daemon_id,
                                   uint64_t now_ns);
  // Applies decoded records of one process (sig ids already validated).
  void ApplyRecords(ProcessState& p, const xpu_record_v1* r, size_t n, uint64_t now_ns);
  void ApplyCounters(ProcessState& p, const xpu::v1::ProcessBatch& pb, uint64_t now_ns);
  // Registers the communicator of a newly defined collective signature.
  void NoteSignature(const ProcessState& p, const SignatureInfo& s);
  // Closes the current window and returns its summary; resets accumulators.
  WindowSummaryRow CloseWindow(uint64_t now_ns);
  // Marks silent / alive; returns nothing, the registry reads the result.
  void UpdateLiveness(uint64_t now_ns, uint64_t silent_after_ns);

  const std::map<std::string, std::unique_ptr<ProcessState>>& processes() const {
    return processes_;
  }
  const CollectiveTable& collectives() const { return collectives_; }
  const std::map<uint64_t, Communicator>& communicators() const { return comms_; }
  const std::deque<WindowSummaryRow>& windows() const { return windows_; }
  const std::string& job_name() const { return job_name_; }
  uint64_t first_seen_ns() const { return first_seen_ns_; }
  uint64_t last_seen_ns() const { return last_seen_ns_; }
  uint64_t records() const { return records_; }
  uint64_t window_start_ns() const { return window_start_ns_; }
  // running / silent / finished
  std::string_view StateName() const;
  size_t Alive() const;

  // Engine replicas (docs/architecture.md, "Engine replicas"): counters the
  // job's previous owner committed, carried on by this one (records, first
  // seen, per process key its records).
  void CarryOver(uint64_t first_seen_ns, uint64_t records,
                 std::map<std::string, uint64_t> process_records);
  // Per daemon stream ("daemon_id#incarnation"), the highest batch_seq whose
  // records this job holds: a batch at or below it is a replay and its
  // records are not applied again.
  std::map<std::string, uint64_t>& stream_seq() { return stream_seq_; }

 private:
  mutable std::mutex mu_;
  std::string job_;
  std::string job_name_;
  size_t ring_capacity_;
  uint64_t first_seen_ns_;
  uint64_t last_seen_ns_;
  uint64_t window_start_ns_;
  uint64_t records_ = 0;
  std::map<std::string, std::unique_ptr<ProcessState>> processes_;
  CollectiveTable collectives_;
  std::map<uint64_t, Communicator> comms_;
  std::deque<WindowSummaryRow> windows_;  // recent, bounded
  std::map<std::string, uint64_t> stream_seq_;
  std::map<std::string, uint64_t> carried_records_;  // process key -> records
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_JOB_STATE_H_
