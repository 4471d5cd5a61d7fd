// profile_window.h — the daemon's side of a profiling window (Command kind
// "profile"; docs/profiling-window.md).
//
// For every live process of the job on this node (optionally filtered by
// rank), in parallel:
//   1. attach a ProfileCapture to the process (the drain now keeps a copy of
//      everything it reads from that ring) and write a request into the
//      ring's control block (include/xpu/ring.h, xpu_ring_profile_ctl_v1);
//   2. poll the hook's answer every `poll_ms`: STARTED, then a final status;
//      once final, wait until the drain has read past the write index seen
//      at that moment (every window record is then in the capture), and
//      take the records out;
//   3. summarize each process's window into the behaviour pattern of every
//      function on its critical path (common/analysis/behavior_pattern.h,
//      PerfTracker §4.2) and answer with a ProfileReply that carries only
//      those summaries. The kernel records themselves never leave the node:
//      the collector keeps them out of the history and the engine stream.
// A process that does not answer by the window's end plus `grace_ms` (or the
// command's deadline) is reported as "timeout" with its last status; one
// that exits meanwhile as "exited".
//
// Threads: one per command in flight (a window lasts seconds; the engine
// stream's reader must not wait for it). They take the collector's lock
// only for short steps (control block, capture hand-over).
#ifndef XPU_DAEMON_PROFILE_WINDOW_H_
#define XPU_DAEMON_PROFILE_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ring/ring_reader.h"
#include "xpu/ring.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.pb.h"

namespace xpu::daemon {

class Collector;

struct ProfileOptions {
  uint32_t default_ms = 15000;  // when the command gives none
  uint64_t poll_ms = 50;
  uint64_t grace_ms = 15000;                 // beyond the window: finalize wait, drain
  size_t max_records_per_process = 2000000;  // captured records (64 MB per process at most)
  size_t max_functions = 256;                // shipped per process, highest beta first
};

// "done", "skipped_other_client", ... for a hook status, and the reason in
// words for a status other than done ("" for done).
std::string ProfileStatusName(uint32_t status);
std::string ProfileStatusReason(uint32_t status, int32_t detail);

// Summarizes a finished window of one process (pure; tests call it).
// `sigs` are the process's signatures by id.
xpu::v1::ProcessProfile SummarizeWindow(const xpu::v1::ProcessIdentity& identity,
                                        const std::vector<xpu_record_v1>& records,
                                        const std::map<uint32_t, ring::SignatureInfo>& sigs,
                                        const xpu_ring_profile_ctl_v1& ctl, size_t max_functions);

class ProfileRunner {
 public:
  using ReplyFn = std::function<void(xpu::v1::CommandReply)>;
  ProfileRunner(Collector* collector, const ProfileOptions& options);
  ~ProfileRunner();
  ProfileRunner(const ProfileRunner&) = delete;
  ProfileRunner& operator=(const ProfileRunner&) = delete;

  // Runs `command` on a thread of its own; `done` receives the reply (on
  // that thread). After Stop() it answers at once with an error.
  void Start(const xpu::v1::Command& command, ReplyFn done);
  // Ends the windows in flight early (their processes are reported as
  // "timeout: daemon stopping") and joins every thread.
  void Stop();

 private:
  void Run(const xpu::v1::Command& command, const ReplyFn& done);

  Collector* const collector_;
  const ProfileOptions options_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::mutex mu_;
  bool stopping_ = false;      // guarded by mu_
  std::list<Worker> workers_;  // guarded by mu_; finished ones are joined by the next Start
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_PROFILE_WINDOW_H_
