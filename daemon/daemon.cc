#include "daemon/daemon.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/metrics/exposition.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("daemon");
  return logger;
}

constexpr uint64_t kNsPerMs = 1000000ull;
constexpr uint64_t kNsPerS = 1000000000ull;

}  // namespace

absl::StatusOr<DaemonConfig> MakeDaemonConfig(const DaemonOptions& o, const std::string& version) {
  DaemonConfig c;
  c.collector.table.history_records = o.history_records;
  c.collector.table.max_processes = o.max_processes;
  c.collector.retain_exited_ns = o.retain_exited_s * kNsPerS;
  c.collector.collect_for_engine = !o.no_engine;
  c.hook.socket = ResolveSocketPath(o.socket);
  c.hook.allow_any_uid = o.allow_any_uid;
  c.hook.ring.abandon_grace_ns = o.abandon_grace_ms * kNsPerMs;
  c.hook.ring.max_file_size = o.max_ring_mb << 20;
  c.engine_enabled = !o.no_engine;
  c.drain_ms = o.drain_ms;
  c.flush_ms = o.flush_ms;
  c.idle_exit_ns = o.idle_exit_s * kNsPerS;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  c.engine.target = o.engine;
  c.engine.host = host;
  c.engine.daemon_id =
      o.daemon_id.empty() ? absl::StrCat(host, ":", getpid(), ":", RealtimeNs()) : o.daemon_id;
  c.engine.version = version;
  c.engine.tls_ca_file = o.tls_ca;
  c.engine.tls_cert_file = o.tls_cert;
  c.engine.tls_key_file = o.tls_key;
  c.engine.insecure = o.insecure;
  c.engine.compact_records = o.wire != "raw";
  c.engine.buffer_bytes = o.buffer_mb << 20;
  // Pending records per process never need to exceed the engine buffer.
  c.collector.max_pending_records =
      std::max<uint64_t>(1024, c.engine.buffer_bytes / sizeof(xpu_record_v1));
  if (c.engine_enabled) {
    auto token = ResolveToken(o);
    if (!token.ok()) return token.status();
    c.engine.token = *token;
  }
  c.metrics_addr = o.metrics_addr;
  c.version = version;
  return c;
}

Daemon::Daemon(const DaemonConfig& config) : config_(config) {}

Daemon::~Daemon() { Stop(0); }

absl::Status Daemon::Start() {
  collector_ = std::make_unique<Collector>(config_.collector);
  if (config_.engine_enabled) {
    auto client = EngineClient::Create(config_.engine, collector_.get(), collector_.get());
    if (!client.ok()) return client.status();
    engine_client_ = std::move(*client);
  }
  hook_server_ = std::make_unique<HookServer>(config_.hook, collector_.get());
  absl::Status s = hook_server_->Start();
  if (!s.ok()) return s;
  if (engine_client_) engine_client_->Start();
  if (!config_.metrics_addr.empty()) {
    metrics_ = std::make_unique<DaemonMetrics>(collector_.get(), hook_server_.get(),
                                               engine_client_.get());
    process_metrics_ = std::make_unique<metrics::ProcessCollector>("daemon", config_.version);
    http_ = std::make_unique<metrics::HttpEndpoint>(
        [this] { return metrics::Render({metrics_.get(), process_metrics_.get()}); });
    if (absl::Status ms = http_->Serve(config_.metrics_addr); !ms.ok()) {
      if (engine_client_) engine_client_->Stop();
      hook_server_->Stop();
      return ms;
    }
    Log()->info("metrics on port {}", http_->port());
  }
  started_ = true;
  last_busy_ns_ = MonotonicNs();
  drain_thread_ = std::thread([this] { DrainLoop(); });
  Log()->info("xpu-daemon ready: socket {} engine {}", config_.hook.socket.path,
              config_.engine_enabled ? config_.engine.target : std::string("(none)"));
  return absl::OkStatus();
}

void Daemon::Flush() {
  if (!engine_client_) return;
  for (auto& b : collector_->TakeBatches()) engine_client_->Enqueue(std::move(b));
}

bool Daemon::IdleExpired(uint64_t now_ns) const {
  const uint64_t last = last_busy_ns_.load(std::memory_order_relaxed);
  return config_.idle_exit_ns != 0 && last != 0 && now_ns >= last + config_.idle_exit_ns;
}

void Daemon::NoteBusy(uint64_t now_ns) {
  bool busy = collector_->stats().processes_live > 0;
  if (!busy && engine_client_) {
    const EngineClientStats st = engine_client_->stats();
    busy = st.batches_buffered != 0 || st.batches_unacked != 0;
  }
  if (busy) last_busy_ns_.store(now_ns, std::memory_order_relaxed);
}

void Daemon::DrainLoop() {
  uint64_t next_flush = MonotonicNs() + config_.flush_ms * kNsPerMs;
  uint64_t next_busy_check = 0;
  uint64_t next_stats = MonotonicNs() + config_.stats_log_s * kNsPerS;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const uint64_t now = MonotonicNs();
    const size_t read = collector_->DrainOnce(now);
    if (now >= next_flush) {
      Flush();
      next_flush = now + config_.flush_ms * kNsPerMs;
    }
    if (config_.idle_exit_ns != 0 && now >= next_busy_check) {
      NoteBusy(now);
      // A quarter of the idle period, so that a live process is never
      // taken for idle between two checks.
      next_busy_check = now + std::min<uint64_t>(kNsPerS, config_.idle_exit_ns / 4);
    }
    if (now >= next_stats) {
      const CollectorStats st = collector_->stats();
      Log()->info(
          "processes={} live={} records_read={} lost={} (corrupt={} lapped={} abandoned={}) "
          "resyncs={} replayed={} commands_refused={} profile_unclaimed={}",
          st.processes, st.processes_live, st.records_read, st.records_lost, st.records_corrupt,
          st.records_lapped, st.records_abandoned, st.resyncs, st.records_replayed,
          st.commands_refused, st.records_profile_unclaimed);
      next_stats = now + config_.stats_log_s * kNsPerS;
    }
    lock.lock();
    // A full poll means more is waiting: go again without sleeping.
    if (read >= config_.collector.max_records_per_poll) continue;
    cv_.wait_for(lock, std::chrono::milliseconds(config_.drain_ms), [this] { return stop_; });
  }
}

void Daemon::Stop(uint64_t flush_timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (http_) http_->Stop();  // before the components its scrapes read
  if (hook_server_) hook_server_->Stop();
  if (drain_thread_.joinable()) drain_thread_.join();
  if (collector_) {
    // Profile threads answer through the engine client: end them first.
    collector_->StopProfiles();
    collector_->DrainOnce(MonotonicNs());
    Flush();
  }
  if (engine_client_) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(flush_timeout_ms);
    // Until the engine has acknowledged everything: the rings' acked_index
    // then says all is delivered, and a restarted daemon has nothing to
    // read again. What is not acknowledged by the deadline is read again by
    // the next daemon (from the ring's acked_index).
    EngineClientStats st;
    while (std::chrono::steady_clock::now() < deadline) {
      st = engine_client_->stats();
      if (!st.connected || (st.batches_buffered == 0 && st.batches_unacked == 0)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    st = engine_client_->stats();
    engine_client_->Stop();
    Log()->info("flushed on stop: {} batches unsent, {} unacknowledged (read again from the "
                "rings by the next daemon)",
                st.batches_buffered, st.batches_unacked);
  }
  if (started_) Log()->info("xpu-daemon stopped");
}

}  // namespace xpu::daemon
