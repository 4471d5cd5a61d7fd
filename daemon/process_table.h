// process_table.h — per-process state of the daemon.
//
// One entry per registered ring: identity (from the ring header, sanitised)
// plus the kernel-provided peer credentials, the ring reader, the signature
// table read so far, a preallocated circular history of the last N records
// and what is pending for the engine. Entries are keyed by a daemon-local
// id; the natural key (job, pid, start time) keeps two jobs
// on one node, and a reused pid, apart. Exited processes are kept (history
// stays queryable) until the retention period ends.
//
// Thread-safety: none. The collector owns the table and serialises access.
#ifndef XPU_DAEMON_PROCESS_TABLE_H_
#define XPU_DAEMON_PROCESS_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ring/ring_reader.h"
#include "daemon/profile_capture.h"
#include "xpu/v1/common.pb.h"

namespace xpu::daemon {

// Fixed-capacity circular buffer of the newest records, allocated once.
class HistoryBuffer {
 public:
  explicit HistoryBuffer(size_t capacity);
  void Push(const ring::RingRecord& r);
  size_t size() const { return size_; }
  size_t capacity() const { return records_.size(); }
  // Records with since_ns <= start_ns < until_ns (until_ns 0: no upper
  // bound), the newest `last_n` of them (0 = all), in ring order.
  std::vector<ring::RingRecord> Snapshot(uint64_t last_n, uint64_t since_ns,
                                         uint64_t until_ns = 0) const;
  // How many records Snapshot(last_n, since_ns, until_ns) would return,
  // without copying.
  size_t Count(uint64_t last_n, uint64_t since_ns, uint64_t until_ns = 0) const;

 private:
  std::vector<ring::RingRecord> records_;
  size_t head_ = 0;  // next slot to write
  size_t size_ = 0;
};

struct PeerInfo {
  int32_t pid = 0;  // SO_PEERCRED, in the daemon's pid namespace; 0 = none
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat starttime read at registration
};

struct ProcessState {
  ProcessState(uint64_t key, std::unique_ptr<ring::RingReader> reader, const PeerInfo& peer,
               size_t history_records);

  const uint64_t key;
  const ring::RingIdentity identity;
  const PeerInfo peer;
  std::unique_ptr<ring::RingReader> reader;  // null once retired
  HistoryBuffer history;
  std::vector<ring::SignatureInfo> signatures;  // in the order they were read
  size_t signatures_sent = 0;                   // prefix already handed to the engine
  // Pending for the engine since the last batch: packed xpu_record_v1 whose
  // commit word carries (uint32_t)(ring position + 1) (common.proto).
  std::string pending_records;
  uint64_t pending_first_position = 0;  // sequence (RingRecord) of the first pending record
  // While a profiling window runs in this process: a copy of every record
  // drained (profile_window.h); null otherwise.
  std::shared_ptr<ProfileCapture> profile;
  // Lifecycle (monotonic clock).
  bool disconnected = false;  // socket EOF or pid gone: drain, then exit
  uint64_t disconnected_at_ns = 0;
  bool truncation_logged = false;  // the ring file lost its record pages
  bool exited = false;
  uint64_t exited_at_ns = 0;
  bool exit_reported = false;
  uint64_t last_liveness_check_ns = 0;
};

struct ProcessTableOptions {
  size_t history_records = 131072;
  size_t max_processes = 1024;
};

class ProcessTable {
 public:
  explicit ProcessTable(const ProcessTableOptions& options) : options_(options) {}

  // Registers a ring. A live entry with the same (job, pid, start time) that
  // is still connected makes this fail (AlreadyExists); one that is draining
  // or exited is retired and replaced (the hook reconnected with its ring).
  absl::StatusOr<uint64_t> Add(std::unique_ptr<ring::RingReader> reader, const PeerInfo& peer,
                               uint64_t now_ns);
  ProcessState* Find(uint64_t key);
  void ForEach(const std::function<void(ProcessState&)>& fn);
  // Removes exited entries older than `retain_ns`. Returns how many.
  size_t RemoveExited(uint64_t now_ns, uint64_t retain_ns);
  size_t size() const { return entries_.size(); }

 private:
  using NaturalKey = std::tuple<std::string, int32_t, uint64_t>;
  static NaturalKey KeyOf(const ProcessState& s);
  const ProcessTableOptions options_;
  std::map<uint64_t, std::unique_ptr<ProcessState>> entries_;
  uint64_t next_key_ = 1;
};

// Fills the wire identity of a process.
void FillIdentity(const ProcessState& s, xpu::v1::ProcessIdentity* out);
// The wire form of a signature read from the ring (common/wire/signature.h).
void FillSignature(const ring::SignatureInfo& s, xpu::v1::Signature* out);
void FillCounters(const ProcessState& s, xpu::v1::ProcessCounters* out);

// The full ring position of a record packed for the engine, from its commit
// word (low 32 bits of position + 1) and a position at or below it that is
// less than 2^32 behind.
uint64_t PositionFromCommit(uint64_t base, uint32_t commit);

// starttime (field 22) of /proc/<pid>/stat, or 0 when the process is gone.
uint64_t ReadProcStartTicks(int32_t pid);

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_PROCESS_TABLE_H_
