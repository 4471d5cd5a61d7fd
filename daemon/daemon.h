// daemon.h — puts the daemon's components together: hook server (socket
// thread), collector (drain thread) and, unless disabled, the engine client.
// main.cc only parses flags, sets up logging and signals, and runs this.
//
// Threads: Start/Stop from the owner; the drain thread drains every
// `drain_ms` (at once again when a ring had more than one poll's worth) and
// hands a batch to the engine client every `flush_ms`.
#ifndef XPU_DAEMON_DAEMON_H_
#define XPU_DAEMON_DAEMON_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "common/metrics/http_endpoint.h"
#include "common/metrics/process_collector.h"
#include "daemon/collector.h"
#include "daemon/daemon_metrics.h"
#include "daemon/engine_client.h"
#include "daemon/hook_server.h"
#include "daemon/options.h"

namespace xpu::daemon {

struct DaemonConfig {
  CollectorOptions collector;
  HookServerOptions hook;
  bool engine_enabled = true;
  EngineClientOptions engine;
  uint64_t drain_ms = 10;
  uint64_t flush_ms = 1000;
  uint64_t stats_log_s = 60;
  uint64_t idle_exit_ns = 0;  // 0: never idle out
  std::string metrics_addr;  // "" = no /metrics
  std::string version;
};

// Builds the component configuration from parsed flags.
absl::StatusOr<DaemonConfig> MakeDaemonConfig(const DaemonOptions& options,
                                              const std::string& version);

class Daemon {
 public:
  explicit Daemon(const DaemonConfig& config);
  ~Daemon();
  // Binds the socket (fails if another daemon owns it) and starts the threads.
  absl::Status Start();
  // Stops accepting, drains once more, flushes a last batch and gives the
  // engine client up to `flush_timeout_ms` to have what is buffered
  // acknowledged (what is not is read again by the next daemon).
  void Stop(uint64_t flush_timeout_ms = 5000);
  Collector& collector() { return *collector_; }
  const std::string& socket_path() const { return config_.hook.socket.path; }
  // Port of /metrics (0 when not served).
  int metrics_port() const { return http_ ? http_->port() : 0; }
  // True once the daemon has served no live process and had nothing left to
  // send for `idle_exit_ns` (never when that is 0). main.cc then stops it.
  bool IdleExpired(uint64_t now_ns) const;

 private:
  void DrainLoop();
  void NoteBusy(uint64_t now_ns);
  void Flush();

  const DaemonConfig config_;
  std::unique_ptr<Collector> collector_;
  std::unique_ptr<HookServer> hook_server_;
  std::unique_ptr<EngineClient> engine_client_;
  std::unique_ptr<DaemonMetrics> metrics_;
  std::unique_ptr<metrics::ProcessCollector> process_metrics_;
  std::unique_ptr<metrics::HttpEndpoint> http_;
  std::thread drain_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool started_ = false;
  std::atomic<uint64_t> last_busy_ns_{0};
};

}  // namespace xpu::daemon

#endif  // XPU_DAEMON_DAEMON_H_
