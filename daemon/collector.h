// collector.h — the daemon's core: drains every registered ring into the
// process table, aggregates windows, builds batches for the engine and
// answers the engine's commands from the history.
//
// Threads: the hook server thread calls AddRing/MarkDisconnected; the drain
// thread (see Daemon) calls DrainOnce/TakeBatches; the engine client's reader
// thread calls HandleCommand and FullState. One mutex guards the table; no
// call blocks on I/O while holding it (only shared-memory reads and /proc).
#ifndef XPU_DAEMON_COLLECTOR_H_
#define XPU_DAEMON_COLLECTOR_H_

#include <cstdint>
#include <functional>
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

// Gives the engine client what it must re-send after a reconnect.
class StateProvider {
 public:
  virtual ~StateProvider() = default;
  // Identity and the full signature table of every live process.
  virtual std::vector<xpu::v1::ProcessBatch> FullState() = 0;
};

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
  // Last member: destroyed (its threads joined) while the rest still exists.
  std::unique_ptr<ProfileRunner> profiles_;
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_COLLECTOR_H_
