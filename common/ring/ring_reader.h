// common/ring/ring_reader.h — the consumer side of include/xpu/ring.h,
// shared by xpu-daemon (which drains rings) and xpu-ring-dump (which prints
// one read-only).
//
// A RingReader maps one ring file (a memfd received from the hook, or a ring
// file on disk) and implements the consume protocol of ring.h. Every byte of
// the mapping is treated as hostile: the header is copied and validated once
// against the real file size (fstat), the layout is never re-read, records
// and signatures are copied out before they are looked at, and anything
// malformed is counted, never trusted. No input makes the reader crash.
//
// A producer that shrinks the file after it was mapped would make the lost
// pages raise SIGBUS. The reader adds F_SEAL_SHRINK when the memfd allows
// sealing (`shrink_sealed()`), and every access to the mapping goes through
// shm_guard.h, so a fault never kills the daemon. A ring file cannot be
// sealed: when its owner or root truncates it but the header page survives,
// the reader becomes `truncated()`: it reads no more records (their slots
// may be gone, and the hook writes them into private pages,
// hook/ring/ring_fault_guard.h) and counts every position the hook's
// write_index passes as lost (XPU_LOSS_TRUNCATED), so the accounting stays
// exact. When the header page is gone too the reader is `faulted()`: it
// counts the positions it had seen written and not read, then reads nothing
// more and counts as drained; the live state keeps its last good values.
//
// Ownership: the reader owns `header.read_index` (it is the only writer of
// it, release-stored after each Poll) and the consumer block
// (xpu_ring_consumer_v1: acknowledged position and losses by reason,
// cumulative over daemon restarts) unless opened read-only, in which case it
// keeps a private cursor and never writes to the mapping.
//
// Restart: a reader opened on a ring whose consumer block is valid starts at
// its acked_index, so records a previous daemon read but never delivered are
// read again (the engine drops any it already had, by position). Corrupted
// indices are detected, resynchronized and counted (ring.h); no counter ever
// wraps.
//
// Thread-safety: not thread-safe; one thread polls a reader at a time.
#ifndef XPU_COMMON_RING_RING_READER_H_
#define XPU_COMMON_RING_RING_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xpu/record.h"
#include "xpu/ring.h"

namespace xpu::ring {

struct RingReaderOptions {
  // Map read-only, never write read_index; start at the oldest record still
  // in the ring instead of at read_index (for inspection tools).
  bool read_only = false;
  // An uncommitted slot that write_index has passed is skipped (and counted as
  // abandoned) after this long. 0 skips at once.
  uint64_t abandon_grace_ns = 1000000000ull;
  // Largest file accepted; protects the daemon against giant capacities.
  uint64_t max_file_size = 4ull << 30;
  // Positions the producer may have reserved but not yet committed (its
  // concurrent writers). write_index further ahead than this of the records
  // the hook counts as written, with the slot at the cursor never committed,
  // is a corrupted index, not a crashed writer.
  uint64_t max_in_flight = 4096;
};

// Identity fields of the header, sanitised to printable ASCII.
struct RingIdentity {
  std::string job;
  std::string job_name;
  std::string host;
  int32_t pid = 0;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;
  int32_t local_world_size = 0;
  int32_t device = -1;
  uint64_t created_ns = 0;
  uint64_t start_time_ticks = 0;
};

// Validated layout copied from the header at open time.
struct RingLayout {
  uint32_t ring_capacity = 0;
  uint32_t sig_capacity = 0;
  uint64_t ring_offset = 0;
  uint64_t sig_offset = 0;
  uint64_t str_offset = 0;
  uint64_t str_capacity = 0;
  uint64_t file_size = 0;
};

// Live, producer-owned header fields (relaxed snapshot; values are hints).
struct RingLiveState {
  uint64_t write_index = 0;
  uint64_t read_index = 0;
  uint64_t sig_count = 0;
  uint64_t str_used = 0;
  uint64_t heartbeat_ns = 0;
  uint32_t producer_state = 0;
  uint32_t timing_policy = 0;
  uint64_t counters[XPU_CNT_MAX] = {};
};

// What the reader counted. Losses (corrupt ... rejected) are cumulative over
// every reader of the ring (restored from the consumer block); the rest
// counts this reader's work.
struct RingReaderCounters {
  uint64_t records_read = 0;       // accepted
  uint64_t records_corrupt = 0;    // committed but failed validation
  uint64_t records_lapped = 0;     // overwritten before they were read
  uint64_t records_abandoned = 0;  // never committed (crashed/stuck producer)
  uint64_t records_resync = 0;     // unread when corrupted indices forced a resync
  uint64_t records_restart = 0;    // a dead daemon's undelivered records, overwritten since
  uint64_t records_buffer = 0;     // shed by the daemon while the engine was away (AddLoss)
  uint64_t records_rejected = 0;   // refused by the engine (AddLoss)
  uint64_t records_truncated = 0;  // written after the ring file lost its pages
  uint64_t resyncs = 0;            // resynchronizations
  uint64_t records_replayed = 0;   // read again after a daemon restart
  uint64_t signatures_read = 0;
  uint64_t signatures_corrupt = 0;
  uint64_t names_bad = 0;          // arena reference out of bounds: inline prefix used
  uint64_t index_regressions = 0;  // write_index went backwards (hostile producer)
  // Every record lost after the hook wrote it, all reasons.
  uint64_t LostTotal() const;
};

struct SignatureInfo {
  xpu_signature_v1 sig;  // copy; sig.commit == id
  std::string name;      // sanitised
};

// A record read from the ring, with its ring position and its sequence:
// the records and losses accounted before it (RingReader::records_accounted).
// The two are equal until corrupted indices force a resynchronization; from
// then on the position may jump back or far ahead, while the sequence still
// grows by one per record or loss. Whatever is deduplicated by position
// downstream (the engine) must use the sequence.
struct RingRecord {
  uint64_t position;
  xpu_record_v1 rec;  // commit zeroed
  uint64_t sequence = 0;
};

// Returns OK when `h` describes a consistent ring that fits in `actual_size`
// bytes and no larger than `max_file_size`. Pure; used by the reader and tests.
absl::Status ValidateRingHeader(const xpu_ring_header_v1& h, uint64_t actual_size,
                                uint64_t max_file_size, RingLayout* layout);

// Mask of every XPU_REC_* flag defined by ABI version 1, up to the highest
// one; a flag added to record.h must move this bound, or its records are
// rejected as corruption.
constexpr uint16_t kKnownRecordFlags = (XPU_REC_PROFILE_WINDOW << 1) - 1;

class RingReader {
 public:
  // Maps `fd` (ownership of the fd stays with the caller; the mapping
  // survives closing it).
  static absl::StatusOr<std::unique_ptr<RingReader>> FromFd(int fd,
                                                            const RingReaderOptions& options);
  // Opens and maps a ring file (also /proc/<pid>/fd/<n>).
  static absl::StatusOr<std::unique_ptr<RingReader>> FromPath(const std::string& path,
                                                              const RingReaderOptions& options);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  // Consumes up to `max_records` committed records into `out` (appended),
  // validating each. `now_ns` is any monotonic clock, used for the grace
  // period of abandoned slots. Returns the number appended.
  size_t Poll(uint64_t now_ns, size_t max_records, std::vector<RingRecord>* out);

  // Reads signatures published since the last call into `out` (appended).
  void PollSignatures(std::vector<SignatureInfo>* out);

  // The signature `id` if it has been read and is valid, else nullptr.
  const SignatureInfo* signature(uint32_t id) const;
  const std::vector<uint32_t>& known_signature_ids() const { return known_ids_; }

  // True when every reserved position has been consumed (or skipped).
  bool Drained() const;

  // The engine has every record below `position` (or it was counted lost):
  // advances acked_index (never past the cursor) and persists it.
  void Acknowledge(uint64_t position);
  uint64_t acked_index() const { return acked_; }
  // Counts `n` records lost by the consumer after reading them (reason
  // XPU_LOSS_BUFFER or XPU_LOSS_REJECTED) at `position`, and persists it.
  void AddLoss(xpu_consumer_loss reason, uint64_t position, uint64_t n);
  // Records the hook wrote that this ring's consumers have accounted for
  // (read or counted lost): cursor - position_bias.
  uint64_t records_accounted() const { return cursor_ - bias_; }
  // The ring position of sequence `seq` (RingRecord) under the current
  // position bias; exact unless a resynchronization came in between.
  uint64_t PositionOfSequence(uint64_t seq) const { return seq + bias_; }
  // Still re-reading what a previous daemon had read but not delivered.
  bool replaying() const { return cursor_ < replay_end_; }

  RingLiveState ReadLiveState() const;
  // Guarded copy of the first `n` bytes of the header page (n is clamped to
  // XPU_RING_HEADER_SIZE); false when the mapping faulted. Used for the
  // hang-watch progress table (daemon/evidence/ring_progress.h).
  bool CopyHeaderPage(void* dst, size_t n) const;
  // Profiling-window control block (ring.h, xpu_ring_profile_ctl_v1): a
  // copy taken after an acquire load of `ack` (so the reply fields are at
  // least as new as it). False when the mapping faulted.
  bool ReadProfileControl(xpu_ring_profile_ctl_v1* out) const;
  // Writes the daemon-owned request half: the fields, then req_id with a
  // release store. False for a read-only reader or a faulted mapping.
  bool WriteProfileRequest(uint32_t req_id, uint32_t duration_ms, uint32_t max_records,
                           uint64_t now_ns);
  const RingIdentity& identity() const { return identity_; }
  const RingLayout& layout() const { return layout_; }
  const RingReaderCounters& counters() const { return counters_; }
  uint64_t cursor() const { return cursor_; }
  bool shrink_sealed() const { return shrink_sealed_; }
  // True once the header page itself faulted (the file lost it): nothing
  // more can be read or counted.
  bool faulted() const { return faulted_; }
  // True once record pages faulted while the header page is still there:
  // records are counted as lost, no longer read.
  bool truncated() const { return truncated_; }

 private:
  RingReader(uint8_t* base, uint64_t map_size, const RingLayout& layout,
             const RingIdentity& identity, const RingReaderOptions& options);
  uint64_t LoadWriteIndex() const;
  // Guarded accesses to the mapping; on a fault they set faulted_ and
  // return 0 / false.
  uint64_t Load64(const uint64_t* p, bool acquire) const;
  uint32_t Load32(const uint32_t* p, bool acquire) const;
  bool Copy(void* dst, const void* src, size_t n) const;
  // Reads entry `id` of the signature table; adds it to the known set when it
  // is published and valid. Returns true when it is (now) known.
  bool TryReadSignature(uint32_t id);
  bool ValidateRecord(const xpu_record_v1& rec);
  // Loss bookkeeping: `n` positions from `position` lost for `reason`
  // (inside the replay range they count against the previous reader's).
  void Lose(xpu_consumer_loss reason, uint64_t position, uint64_t n);
  // Corrupted indices: jump to `w`, count what could not be read.
  void Resync(uint64_t w);
  // Ends the replay range: what failed there beyond the previous reader's
  // own unsettled losses was lost to the restart.
  void FinishReplay();
  // After a fault: truncated_ when the header page is still readable (the
  // fault was in records, signatures or names), else counts the positions
  // seen written and not read and stays faulted.
  void OnFault();
  // Poll() of a truncated ring: every new position is lost.
  void CountTruncated();
  void RestoreConsumerState(uint64_t read_index, uint64_t write_index);
  void PersistConsumerState();
  xpu_ring_consumer_v1* consumer() const;

  uint8_t* const base_;
  const uint64_t map_size_;
  const RingLayout layout_;
  const RingIdentity identity_;
  const RingReaderOptions options_;
  xpu_ring_header_v1* header_;  // points into the mapping (hostile)
  uint64_t cursor_ = 0;
  // Abandoned-slot tracking: the reader has been stuck since
  // `stall_since_ns_`; every uncommitted slot below `stall_write_index_` had
  // been passed by write_index at that time.
  bool stalled_ = false;
  uint64_t stall_since_ns_ = 0;
  uint64_t stall_write_index_ = 0;
  // Signatures by id. Maps, not vectors: sig_capacity comes from the
  // producer and may be huge.
  std::unordered_map<uint32_t, SignatureInfo> sigs_;
  std::unordered_set<uint32_t> bad_sigs_;
  std::vector<uint32_t> known_ids_;
  std::vector<uint32_t> pending_new_;  // read but not yet returned by PollSignatures
  uint32_t lowest_unknown_sig_ = 1;
  RingReaderCounters counters_;
  // Consumer state (ring.h, xpu_ring_consumer_v1), mirrored here.
  uint64_t acked_ = 0;
  uint64_t bias_ = 0;
  // Losses at positions >= acked_, as runs (start, count), oldest first.
  std::vector<std::pair<uint64_t, uint64_t>> unsettled_;
  uint64_t unsettled_total_ = 0;
  // Replay of a previous daemon's undelivered range [cursor_, replay_end_).
  uint64_t replay_end_ = 0;
  uint64_t replay_failed_ = 0;      // positions there that could not be read
  uint64_t replay_known_lost_ = 0;  // the previous reader's unsettled losses
  bool shrink_sealed_ = false;
  mutable bool faulted_ = false;
  bool truncated_ = false;
  uint64_t last_write_index_ = 0;     // write_index at the last Poll
  mutable RingLiveState last_live_;  // the last ReadLiveState() that did not fault
};

// Replaces every byte outside printable ASCII with '?', so that names from
// shared memory are always valid UTF-8 on the wire.
std::string SanitizeName(const char* data, size_t len);

}  // namespace xpu::ring

#endif  // XPU_COMMON_RING_RING_READER_H_
