// collector.h — the daemon's core: drains every registered ring into the
// process table, builds batches for the engine and answers the engine's
// commands from the history.
//
// Threads: the hook server thread calls AddRing/MarkDisconnected; the drain
// thread (see Daemon) calls DrainOnce/TakeBatches; the engine client's reader
// thread calls HandleCommand and FullState. One mutex guards the table; no
// call blocks on I/O while holding it (only shared-memory reads and /proc).
#ifndef XPU_DAEMON_COLLECTOR_H_
#define XPU_DAEMON_COLLECTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "common/logging/logging.h"
#include "common/ring/ring_reader.h"
#include "daemon/process_table.h"
#include "daemon/profile_window.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

// Receives commands from the engine (kind "history", ...).
class CommandHandler {
 public:
  virtual ~CommandHandler() = default;
  virtual void HandleCommand(const xpu::v1::Command& command, xpu::v1::CommandReply* reply) = 0;
  // Commands that take seconds (a profiling window) answer later through
  // `done`, from another thread, so that the engine stream's reader never
  // waits for them. Returns false for a command to be given to
  // HandleCommand instead.
  virtual bool HandleCommandAsync(const xpu::v1::Command& command,
                                  std::function<void(xpu::v1::CommandReply)> done) {
    return false;
  }
};

// Gives the engine client what it must re-send after a reconnect, and
// takes the engine's word on what it has.
class StateProvider {
 public:
  virtual ~StateProvider() = default;
  // Identity and the signature table handed out so far of every process
  // still in the table (exited ones flagged).
  virtual std::vector<xpu::v1::ProcessBatch> FullState() = 0;
  // The engine durably has every record of the process below `end_position`
  // (ProcessBatch.end_position of an acknowledged batch).
  virtual void Acknowledged(uint64_t process_key, uint64_t end_position) {}
  // `records` read from the process will never reach the engine: shed from
  // the buffer (XPU_LOSS_BUFFER) or refused by it (XPU_LOSS_REJECTED).
  virtual void Lost(uint64_t process_key, xpu_consumer_loss reason, uint64_t records) {}
};

// Whether `command`'s caller may act on a process of `uid`: the engine's
// own automatic actions (when `engine_actions`), callers with all_jobs, or
// the process's own user. A command without a caller is refused. `why` says
// why not.
bool CallerMayAct(const xpu::v1::Command& command, uint32_t uid, bool engine_actions,
                  std::string* why);

struct CollectorOptions {
  ProcessTableOptions table;
  uint64_t retain_exited_ns = 600ull * 1000000000ull;
  // Records read per ring per DrainOnce (keeps one busy ring from starving the rest).
  size_t max_records_per_poll = 65536;
  // Keep records/windows pending for the engine (off in --no-engine mode).
  bool collect_for_engine = true;
  // Pending records per process beyond which the oldest are dropped (counted).
  size_t max_pending_records = 1 << 22;
  // Records per ProcessBatch message, and soft byte cap of one Batch.
  size_t max_records_per_message = 65536;
  size_t max_batch_bytes = 3 << 20;
  // A disconnected process whose ring never drains is declared exited after this.
  uint64_t drain_timeout_ns = 10ull * 1000000000ull;
  // How often /proc/<pid> is checked for each connected process.
  uint64_t liveness_interval_ns = 1000000000ull;
  // Reply budget of a history command.
  size_t max_reply_records = 98304;
  // Act on the engine's automatic commands (hang evidence, profiling after a
  // regression); users' commands are always checked against their uid.
  bool engine_actions = true;
  // Profiling windows (command kind "profile", profile_window.h).
  ProfileOptions profile;
};

struct CollectorStats {
  uint64_t processes = 0;
  uint64_t processes_live = 0;
  uint64_t records_read = 0;
  uint64_t records_corrupt = 0;
  uint64_t records_lapped = 0;
  uint64_t records_abandoned = 0;
  uint64_t records_dropped_pending = 0;
  uint64_t records_lost = 0;  // every reason, cumulative per ring
  uint64_t resyncs = 0;
  uint64_t records_replayed = 0;
  uint64_t commands_refused = 0;  // processes a command's caller may not act on
  // Profiling-window records read while no window of this daemon was
  // capturing (a window the daemon gave up on, or one another daemon asked
  // for): dropped, they are never forwarded raw.
  uint64_t records_profile_unclaimed = 0;
};

class Collector : public CommandHandler, public StateProvider {
 public:
  explicit Collector(const CollectorOptions& options);

  // Registers a ring received from the hook. `now_ns` is CLOCK_MONOTONIC.
  absl::StatusOr<uint64_t> AddRing(std::unique_ptr<ring::RingReader> reader, const PeerInfo& peer,
                                   uint64_t now_ns);
  // The hook's connection closed: drain what is left, then mark it exited.
  void MarkDisconnected(uint64_t key, uint64_t now_ns);

  // Reads every ring once; updates history, windows, pending data, liveness
  // and lifecycle; drops exited entries past retention. Returns records read.
  size_t DrainOnce(uint64_t now_ns);

  // Everything new since the previous call, split into messages of bounded
  // size. Every live process appears (counters are its liveness signal).
  std::vector<xpu::v1::Batch> TakeBatches();

  std::vector<xpu::v1::ProcessBatch> FullState() override;
  void Acknowledged(uint64_t process_key, uint64_t end_position) override;
  void Lost(uint64_t process_key, xpu_consumer_loss reason, uint64_t records) override;
  // CallerMayAct with this daemon's policy.
  bool MayAct(const xpu::v1::Command& command, const ProcessState& s, std::string* why) const;
  void HandleCommand(const xpu::v1::Command& command, xpu::v1::CommandReply* reply) override;
  // Kind "profile" runs on a ProfileRunner thread.
  bool HandleCommandAsync(const xpu::v1::Command& command,
                          std::function<void(xpu::v1::CommandReply)> done) override;
  // Ends the profiling windows in flight and joins their threads (before
  // whoever receives their replies goes away).
  void StopProfiles();
  // Runs `fn` on every entry under the lock (the profile runner's short steps).
  void ForEachProcess(const std::function<void(ProcessState&)>& fn);

  CollectorStats stats();
  // For tests: runs `fn` on the entry under the lock; false if absent.
  bool WithProcess(uint64_t key, const std::function<void(ProcessState&)>& fn);

 private:
  void DrainProcess(ProcessState& s, uint64_t now_ns);
  void HandleHistory(const xpu::v1::Command& command, xpu::v1::CommandReply* reply);
  // Kind "evidence" (daemon/evidence/evidence_collector.h); blocks the
  // calling thread up to the command's deadline, not the table lock.
  void HandleEvidence(const xpu::v1::Command& command, xpu::v1::CommandReply* reply);

  const CollectorOptions options_;
  std::mutex mu_;
  ProcessTable table_;  // guarded by mu_
  uint64_t records_dropped_pending_ = 0;
  std::vector<ring::RingRecord> scratch_records_;
  std::vector<ring::SignatureInfo> scratch_sigs_;
  logging::RateLimiter bad_limiter_{10, 10000000000ull};  // per-record losses are logged sparingly
  uint64_t records_profile_unclaimed_ = 0;                // guarded by mu_
  mutable std::atomic<uint64_t> commands_refused_{0};
  // Last member: destroyed (its threads joined) while the rest still exists.
  std::unique_ptr<ProfileRunner> profiles_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_COLLECTOR_H_
