// hook/process/daemon_client.h — hands the ring to the node daemon
// (transport.h).
//
// A non-blocking state machine advanced by the background thread (Tick):
// connect the SOCK_SEQPACKET socket, send xpu_hello_v1 with the ring fd as
// SCM_RIGHTS, wait (bounded) for the ack, then keep the socket open so that
// EOF tells the daemon we are gone. Failures retry with backoff 100 ms -> 1 s
// (a refusal by the daemon: 30 s) and are counted
// (XPU_CNT_DAEMON_CONNECT_FAIL); the application never waits. A daemon that
// restarts therefore has every rank back within about a second.
//
// Auto-start: when no daemon answers and XPU_DAEMON is not off, one local
// process (the holder of a non-blocking flock on <socket dir>/daemon.lock)
// spawns xpu-daemon detached in its own session with LD_PRELOAD removed; the
// others just retry. A missing binary is counted and tracing continues into
// the ring (a daemon started later still attaches).
//
// Thread-safety: background thread only (Init before the thread starts),
// except CloseInForkedChild, which runs in a fork child where that thread does
// not exist; the fds it reads are published with atomic stores, cleared before
// they are closed, so a child never closes a number the parent reused.
#ifndef XPU_HOOK_PROCESS_DAEMON_CLIENT_H_
#define XPU_HOOK_PROCESS_DAEMON_CLIENT_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "hook/process/config.h"
#include "hook/ring/ring_writer.h"

namespace xpu::hook {

class DaemonClient {
 public:
  enum class State { kIdle, kAwaitAck, kConnected };

  DaemonClient() = default;
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  void Init(RingWriter* ring, const Config& config);
  // Advances the state machine; returns when it wants the next Tick.
  uint64_t Tick(uint64_t now_ns);

  // Fork child handler: closes the child's copy of the connection (and of
  // the election lock) without touching the parent's state. Async-signal-safe.
  void CloseInForkedChild();

  State state() const { return state_; }
  pid_t spawned_pid() const { return spawned_; }

  // Where xpu-daemon is looked for: XPU_DAEMON_BIN, else next to this
  // library, else <lib dir>/../bin (bundle, wheel, install prefix), else
  // <lib dir>/../daemon (build tree), else $PATH. "" if not found; the
  // process then says so on stderr once (XPU_LOG).
  static std::string FindDaemonBinary(const std::string& configured);

 private:
  bool Connect(uint64_t now_ns);  // true when the hello went out
  void Fail(uint64_t now_ns, uint64_t min_backoff_ns);
  void CloseSocket();
  void MaybeSpawnDaemon(uint64_t now_ns);

  RingWriter* ring_ = nullptr;
  std::string socket_path_;
  std::string daemon_bin_;
  std::string engine_;
  std::string idle_exit_s_;  // --idle-exit-s of a daemon this process starts
  bool autostart_ = true;
  // Set-up failures are reported on stderr once per process (Note).
  int log_level_ = 1;
  int32_t rank_ = -1;
  bool noted_ = false;
  void Note(const std::string& line);
  State state_ = State::kIdle;
  int sock_ = -1;
  int lock_fd_ = -1;
  pid_t spawned_ = 0;
  uint64_t backoff_ns_ = 0;
  uint64_t next_attempt_ns_ = 0;
  uint64_t ack_deadline_ns_ = 0;
  uint64_t next_spawn_ns_ = 0;
};

}  // namespace xpu::hook

#endif  // XPU_HOOK_PROCESS_DAEMON_CLIENT_H_
