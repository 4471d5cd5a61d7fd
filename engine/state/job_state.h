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

#include <algorithm>
#include <array>
#include <atomic>
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
// A record that shows the process moving on: a completed GPU op, host API,
// synchronization or step marker. Not: Python GC (it runs in a process stuck
// in a loop too), call-site links, ops flushed incomplete, intervals opening.
bool IsProgressRecord(uint16_t kind, uint16_t flags);
// Op kinds are named by the shared table (common/record/op_kind.h):
// "allreduce", "gemm", ..., "op<N>" when unknown.
using ::xpu::record::OpKindName;

// Bounded ring of the most recent records of one process, held in chunks
// of kChunkRecords. Memory is taken a chunk at a time as records come and
// given back by Trim() once a window's records were read, so that an idle or
// finished rank holds only its newest few records, not `capacity`. A full
// chunk is kept in the compact record encoding (common/wire/record_codec.h,
// about 12 bytes a record where a record is 32; each chunk encoded on its
// own) and decoded when read; the chunk being filled stays raw. A ring holds
// at most one chunk it has not filled and one only partly held
// (allocated() < held() + 2 * kChunkRecords): records that come while the
// window tick's detectors still read the previous window's copy take only
// their own room, and growing copies nothing.
class RecordRing {
 public:
  static constexpr size_t kChunkRecords = 32;  // 1 KiB raw
  explicit RecordRing(size_t capacity) : capacity_(capacity ? capacity : 1) {}
  void Append(const xpu_record_v1* r, size_t n);
  // Up to n most recent records, oldest first.
  std::vector<xpu_record_v1> Last(size_t n) const;
  // Calls f(record) for the up to n most recent records, oldest first.
  template <class F>
  void ForEachLast(size_t n, F&& f) const {
    WhileLast(n, [&f](const xpu_record_v1& r) {
      f(r);
      return true;
    });
  }
  // How many of the up to n most recent records, oldest first, come before
  // the first for which stop(record) is true.
  template <class F>
  size_t CountLastUntil(size_t n, F&& stop) const {
    return WhileLast(n, [&stop](const xpu_record_v1& r) { return !stop(r); });
  }
  // Calls go(record) for the up to n most recent records, oldest first, a
  // chunk at a time, until it returns false; returns how many it accepted
  // (a record a chunk's decoding cannot give back reads as all zero).
  template <class F>
  size_t WhileLast(size_t n, F&& go) const {
    n = std::min(n, held_);
    size_t done = 0;
    std::vector<xpu_record_v1> unpacked;  // the sealed chunk being read
    for (uint64_t p = written_ - n; p < written_;) {
      const uint64_t chunk = p / kChunkRecords;
      const xpu_record_v1* data =
          chunk == written_ / kChunkRecords ? open_->data() : Unpack(chunk, &unpacked);
      const size_t off = static_cast<size_t>(p % kChunkRecords);
      const size_t m = static_cast<size_t>(std::min<uint64_t>(written_ - p, kChunkRecords - off));
      for (size_t i = 0; i < m; ++i, ++done) {
        if (!go(data[off + i])) return done;
      }
      p += m;
    }
    return done;
  }
  uint64_t written() const { return written_; }
  size_t capacity() const { return capacity_; }  // most records ever kept
  size_t held() const { return held_; }          // records kept now
  // Record slots taken (whole chunks, sealed or being filled).
  size_t allocated() const { return (sealed_.size() - head_ + (open_ ? 1 : 0)) * kChunkRecords; }
  // Bytes the chunks take: the sealed ones' encodings and the raw chunk
  // being filled.
  size_t bytes() const { return sealed_bytes_ + (open_ ? sizeof(Chunk) : 0); }
  // Keeps the newest `keep` records (held() <= keep after it) and frees the
  // chunks that hold none of them.
  void Trim(size_t keep);

 private:
  using Chunk = std::array<xpu_record_v1, kChunkRecords>;
  struct Sealed {
    std::unique_ptr<char[]> data;  // compact encoding of the chunk's records
    uint32_t size = 0;
  };
  // Encodes the open chunk (full) as the newest sealed one.
  void Seal();
  // The records of sealed chunk `chunk`, decoded into *out.
  const xpu_record_v1* Unpack(uint64_t chunk, std::vector<xpu_record_v1>* out) const;
  // Frees the chunks wholly before position p.
  void DropBefore(uint64_t p);
  // sealed_[head_ + i] holds positions [(first_chunk_ + i) * kChunkRecords,
  // (first_chunk_ + i + 1) * kChunkRecords), the full chunks up to the one
  // being filled; the slots before head_ were freed (compacted away once
  // they are half the vector). open_ holds the positions from
  // written_ / kChunkRecords * kChunkRecords to written_ (null when none is
  // held).
  std::vector<Sealed> sealed_;
  size_t head_ = 0;
  uint64_t first_chunk_ = 0;
  std::unique_ptr<Chunk> open_;
  size_t sealed_bytes_ = 0;
  size_t capacity_;
  size_t held_ = 0;
  uint64_t written_ = 0;
};

// Records a ring keeps between windows (ProcessState::ring after
// JobState::TrimRings): for `xpu ranks` and the timeline fallback when a
// daemon cannot be reached (the daemons keep the full history). Small: at
// 100k ranks every record kept per rank is 3.2 MB.
inline constexpr size_t kRingTailRecords = 128;
// Records the ring of the job's pace process (JobState::PaceProcess) keeps
// between windows: the hang monitor reads the job's step period from them
// (engine/hang/progress_watch.cc).
inline constexpr size_t kPaceTailRecords = 4096;
// The least slack ProcessState::SeenUntilNs gives a stream past its last
// batch (daemons flush every second by default).
inline constexpr uint64_t kSeenSlackMinNs = 2000000000ull;
// A record that ended more than this before the window being filled began
// (host clock against engine clock) arrived after its own window was
// analysed: the engine's ingest was behind (a daemon flushes every second).
inline constexpr uint64_t kLateRecordSlackNs = 2000000000ull;

// Record counts by op family within a window ("step-less": no step
// boundaries are needed to compute them).
struct KindCounts {
  uint64_t kernel = 0, gemm = 0, collective = 0, memcpy = 0, sync = 0, host = 0, other = 0;
  void Add(uint16_t kind);
  void Merge(const KindCounts& o);
};

// Why a record a rank's hook wrote never reached the engine's analysis
// (RankInfo.lost, xpu_records_dropped_total{reason}; docs/reliability.md):
// in the hook (ring full), in the ring (corrupt, lapped, abandoned, skipped
// by a resync, written after the ring file was truncated), in the daemon
// (lost to its restart, shed from its buffer), in the engine (refused,
// naming a signature never defined, sent in a compact blob that does not
// decode).
enum LossReason {
  kLossRingFull = 0,
  kLossRingCorrupt,
  kLossRingLapped,
  kLossRingAbandoned,
  kLossRingResync,
  kLossDaemonRestart,
  kLossDaemonBuffer,
  kLossEngineRejected,
  kLossUndefinedSignature,
  kLossRingTruncated,
  kLossRecordUndecodable,  // a compact record blob the engine could not decode
  kLossReasons
};
std::string_view LossReasonName(int reason);

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
  uint64_t last_seen_ns = 0;  // engine clock: last batch for this process
  // The hang figures of `counters` (JobState::ApplyCounters), so that the
  // hang monitor's poll reads them here and does not walk every process's
  // message twice a second: whether the hook's watch flags an op
  // outstanding beyond its threshold, and since when; the oldest start of
  // a collective the process waits in (0: none).
  bool hang_suspect = false;
  uint64_t hang_suspect_since_ns = 0;
  uint64_t oldest_pending_ns = 0;
  // Open while the daemon stream that last sent this process lasts (the
  // ingest's session); null when none did (tests, a seeded process).
  std::shared_ptr<const std::atomic<bool>> stream_open;
  // The latest gaps between batches naming this process (ms, a ring): how
  // often its daemon reports it. A daemon sends every process it reads on
  // every flush, with records or not.
  std::array<uint32_t, 8> batch_gaps_ms{};
  uint8_t batch_gap_next = 0;
  // How far the engine has seen this process at `now_ns` (engine clock):
  // its silence is known up to here. While its daemon's stream is open,
  // that is the last batch that named it plus twice the median of its
  // recent gaps between batches (at least kSeenSlackMinNs): a longer span
  // without a batch is the engine's own backlog (its ingest behind, its
  // threads starved), during which the process's batches wait unread, not
  // a silence of the process. With no stream open (the daemon is gone, or
  // none sent it): `now_ns`. A daemon that stops reading its stream is
  // closed by the engine's keepalive (engine.cc) and then counts as gone.
  uint64_t SeenUntilNs(uint64_t now_ns) const;
  // Notes a batch naming the process at `now_ns` (sets last_seen_ns).
  void NoteBatch(uint64_t now_ns);
  uint64_t last_record_rx_ns = 0;  // engine clock: last batch with records
  uint64_t last_record_ns = 0;     // host clock: latest record end
  // engine clock: last batch with a record of progress (a GPU op or a host
  // API completed, a step marker; not GC, call sites or incomplete ops), the
  // hang monitor's measure of a stalled process
  uint64_t last_progress_rx_ns = 0;
  // host clock: the latest end of a progress record, and the largest gap
  // between consecutive progress (host clock, the job's own pace: free of
  // how often batches arrive) since the hang monitor last read it (it
  // resets it, with the job's lock held).
  uint64_t last_progress_end_ns = 0;
  mutable uint64_t progress_gap_unread_ns = 0;
  // When the process's first step marker arrived (engine clock; 0: none
  // yet): what came before is its start-up, not its pace.
  uint64_t first_step_rx_ns = 0;
  uint64_t records = 0;
  uint64_t unknown_sig = 0;
  uint64_t dropped = 0;                       // every loss of lost[] (cumulative, saturating)
  std::array<uint64_t, kLossReasons> lost{};  // by LossReason
  std::array<uint64_t, kLossReasons> lost_reported{};  // what the metrics have seen
  // Ring position of the next record not yet received: a record sent again
  // (daemon reconnect or restart) below it is dropped as a duplicate.
  uint64_t next_position = 0;
  uint64_t duplicates = 0;
  xpu::v1::ProcessCounters counters;
  // Host intervals opened (XPU_REC_BEGIN) and not closed yet, by signature:
  // their start (hang diagnosis: a checkpoint save is not a hang). Bounded.
  std::map<uint32_t, uint64_t> open_host;
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
  // Of `records`, those that belonged to an earlier window (ended over
  // kLateRecordSlackNs before this one began, from processes known then):
  // they are analysed in this window instead.
  uint64_t late_records = 0;
  KindCounts kinds;
  std::vector<GemmWindowRow> gemm;
  std::vector<CollectiveWindowRow> collectives;
};

// What a restarted engine knows of a rank from its history (store): the
// record count and position it had recorded durably, for the same process
// (pid, host, start time) only.
struct RankSeed {
  int32_t pid = 0;
  std::string host;
  uint64_t start_ticks = 0;
  uint64_t records = 0;
  uint64_t next_position = 0;
  uint64_t undefined_signature = 0;
};
struct JobSeed {
  int64_t owner_uid = -1;
  std::map<std::string, RankSeed> ranks;  // by ProcessState::key
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
  // The key of the process an identity belongs to ("rank:N" or "pid:P@H").
  static std::string ProcessKey(const xpu::v1::ProcessIdentity& id);
  // History of this job from before a restart (applied as processes appear).
  void SetSeed(JobSeed seed);
  // uid of the job's processes (the first one seen); -1 until known. Set
  // once; read without the job's lock (every query's access check asks it,
  // and at 100k ranks the lock is rarely free).
  int64_t owner_uid() const { return owner_uid_.load(std::memory_order_acquire); }
  // Bytes the job's recent-record rings hold: what they took for the
  // records that came (a ring grows with its window's records, up to
  // --ring-records, and keeps its newest kRingTailRecords between windows;
  // full chunks in the compact encoding), at least a raw tail for each of
  // its processes. Not the rings' capacity: a job of 100k ranks holds a
  // small fraction of 100k full rings.
  uint64_t ring_bytes() const {
    return std::max(ring_allocated_bytes_,
                    static_cast<uint64_t>(processes_.size()) * ring_bytes_per_process());
  }
  // What one more process is counted for at least: its ring's tail between
  // windows, raw (32 bytes a record; compact, it takes less).
  uint64_t ring_bytes_per_process() const {
    return std::min(ring_capacity_, kRingTailRecords) * sizeof(xpu_record_v1);
  }
  // Every loss of the job's processes (saturating).
  uint64_t Dropped() const;
  // Its processes' losses by reason (saturating sums).
  std::array<uint64_t, kLossReasons> Lost() const;
  // Registers the communicator of a newly defined collective signature.
  void NoteSignature(const ProcessState& p, const SignatureInfo& s);
  // Closes the current window and returns its summary; resets accumulators.
  WindowSummaryRow CloseWindow(uint64_t now_ns);
  // Marks silent / alive; returns nothing, the registry reads the result.
  void UpdateLiveness(uint64_t now_ns, uint64_t silent_after_ns);
  // Gives back the rings' memory beyond their newest `keep` records (after
  // the window's analyses read them); the pace process keeps `pace_keep`.
  void TrimRings(size_t keep = kRingTailRecords, size_t pace_keep = kPaceTailRecords);
  // The process whose records speak for the job's step period: the lowest
  // rank with records (a rank-less process only when no rank has any);
  // nullptr when none has records.
  const ProcessState* PaceProcess() const;
  // The GPU model most of the job's processes report (ProcessIdentity.gpu_model);
  // empty when none does.
  std::string GpuModel() const;

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
  // Records of progress (IsProgressRecord) applied since the job began: the
  // hang monitor tells from it whether the job moved while it formed a
  // verdict.
  uint64_t progress_records() const { return progress_records_; }
  // Records that came after their window was analysed, since the job began
  // (WindowSummaryRow::late_records of every window closed).
  uint64_t late_records() const { return late_records_; }
  uint64_t window_start_ns() const { return window_start_ns_; }
  // The end of the latest window whose analysis finished (its diagnoses
  // are queued for the history); 0 before the first. Read without the lock.
  uint64_t analysed_until_ns() const { return analysed_until_ns_.load(std::memory_order_acquire); }
  void set_analysed_until_ns(uint64_t ns) {
    analysed_until_ns_.store(ns, std::memory_order_release);
  }
  // When (engine clock) the engine's last window tick held the job's lock
  // (at most kTickHolds spans: it lets go while the window's detectors
  // read their copy of the records): no record could be applied meanwhile,
  // so the hang watch does not count those spans as the job's silence.
  // Under the lock.
  static constexpr size_t kTickHolds = 2;
  struct TickHold {
    uint64_t from_ns = 0, until_ns = 0;
  };
  void set_tick_held(const std::array<TickHold, kTickHolds>& spans) { tick_held_ = spans; }
  // Nanoseconds of [from_ns, until_ns) in which the last tick held the job.
  uint64_t TickHeldWithin(uint64_t from_ns, uint64_t until_ns) const;
  // running / silent / finished
  std::string_view StateName() const;
  size_t Alive() const;

 private:
  mutable std::mutex mu_;
  std::string job_;
  std::string job_name_;
  size_t ring_capacity_;
  uint64_t ring_allocated_bytes_ = 0;  // sum of the rings' buffers
  uint64_t first_seen_ns_;
  uint64_t last_seen_ns_;
  uint64_t window_start_ns_;
  uint64_t records_ = 0;
  uint64_t progress_records_ = 0;
  uint64_t window_late_records_ = 0;  // WindowSummaryRow::late_records so far
  uint64_t late_records_ = 0;         // of the windows closed
  std::atomic<int64_t> owner_uid_{-1};
  std::atomic<uint64_t> analysed_until_ns_{0};
  std::array<TickHold, kTickHolds> tick_held_{};
  void SetOwnerOnce(int64_t uid);
  JobSeed seed_;
  // The processes' signatures, shared (declared before processes_, which
  // point into it).
  std::shared_ptr<SignaturePool> sig_pool_ = std::make_shared<SignaturePool>();
  std::map<std::string, std::unique_ptr<ProcessState>> processes_;
  CollectiveTable collectives_;
  std::map<uint64_t, Communicator> comms_;
  std::deque<WindowSummaryRow> windows_;  // recent, bounded
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_STATE_JOB_STATE_H_
