// engine — wires the engine's parts together: store, registry, metrics,
// detectors, the gRPC server (Ingest + Query) and the window thread.
//
// Window thread: every --window-s it updates liveness, closes each job's
// window, runs the detectors, refreshes the gauges and queues the rows for
// the store. TickWindow() runs the same step on demand (tests).
//
// Engine replicas (--replica-id, engine_replica.cc): with a PostgreSQL
// --db, several engines serve one cluster. Each job is served by the
// replica that holds its lease (replica/ownership.h); ingest routes every
// batch through it (a daemon that reaches another replica is redirected).
// A replica that takes a job over loads the job's rank checkpoints (the
// registry's seeder) and its active diagnoses with what the webhook already
// delivered (the tracker), so that nothing is counted or announced twice.
//
// Thread-safety: Start/Shutdown from one thread; everything else is safe to
// call from any thread.
#ifndef XPU_ENGINE_ENGINE_H_
#define XPU_ENGINE_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/alerting/alert_notifier.h"
#include "engine/alerting/diagnosis_metrics.h"
#include "engine/alerting/diagnosis_tracker.h"
#include "engine/auth/authorizer.h"
#include "engine/auth/local_identity_server.h"
#include "engine/detectors/figures_exporter.h"
#include "engine/engine_options.h"
#include "engine/hang/hang_monitor.h"
#include "engine/hang/hang_service.h"
#include "engine/history/baseline_recorder.h"
#include "engine/history/history.h"
#include "engine/history/history_service.h"
#include "engine/history/store.h"
#include "engine/ingest_service.h"
#include "engine/metrics.h"
#include "engine/profile/profile_monitor.h"
#include "engine/profile/profile_service.h"
#include "engine/query_service.h"
#include "engine/replica/ownership.h"
#include "engine/state/registry.h"
#include "engine/window/detector.h"
#include "engine/window/window_view.h"

namespace grpc {
class Server;
}

namespace xpu::engine {

class Engine {
 public:
  // Validates the options (security rules included), opens the store, loads
  // history and starts serving. Errors are meant for the operator as is.
  static absl::StatusOr<std::unique_ptr<Engine>> Start(const EngineOptions& o,
                                                       Clock clock = RealtimeClock());
  ~Engine();

  int port() const { return port_; }
  // Abstract name of the local identity socket ("" when off).
  std::string identity_socket() const { return identity_ ? identity_->name() : ""; }
  int metrics_port() const { return metrics_.port(); }
  const std::string& engine_id() const { return engine_id_; }
  Registry& registry() { return registry_; }
  Metrics& metrics() { return metrics_; }
  history::Store& store() { return *store_; }
  // Diagnosis delivery (Alertmanager / webhook); null when neither is set.
  AlertNotifier* notifier() { return notifier_.get(); }

  CommandFuture SendCommand(const std::string& daemon_id, xpu::v1::Command cmd) {
    return ingest_->SendCommand(daemon_id, std::move(cmd));
  }
  // One window step now; returns the diagnoses it produced. The window
  // ends at `window_end_ns` (the window loop's boundary, ticked
  // --window-grace-s after it: the records that started after it wait for
  // the next window), or now (0: every record received is in it).
  std::vector<Diagnosis> TickWindow(uint64_t window_end_ns = 0);
  // Adds a detector after the engine's own (for tests of the window tick;
  // call before the first tick). The views are those its detectors share.
  void AddDetector(std::unique_ptr<Detector> d) { detectors_.push_back(std::move(d)); }
  const std::shared_ptr<WindowViews>& views() const { return views_; }
  // Blocks until Shutdown() is called (from another thread or a signal
  // watcher).
  void Wait();
  void Shutdown();
  // Why the engine stopped by itself (another instance took its replica id
  // over); OK otherwise.
  absl::Status exit_status();

 private:
  Engine(const EngineOptions& o, Clock clock);
  void WindowLoop();
  // Where a window tick's time went: seconds per step (the window view,
  // each detector by name, the rank rows), and the processes it held.
  struct TickCost {
    std::map<std::string_view, double> seconds;
    size_t processes = 0;
  };
  // TickWindow's work for one job (engine.cc).
  std::vector<Diagnosis> TickJob(JobState& job, uint64_t now, uint64_t end, WindowCut cut,
                                 TickCost* cost, bool* finished);
  struct RankAge {  // for a rank's xpu_rank_last_record_age_seconds
    std::string label;
    xpu::v1::ProcessIdentity identity;
    double age_s;
  };
  // Every rank's age, or in a large job the oldest (may reorder `ages`).
  void PublishRankAges(const std::string& job, std::vector<RankAge>* ages);
  void RunDetectors(const JobState& job, bool with_lock, std::vector<VectorSink>* sinks,
                    TickCost* cost);
  void NoteLateRecords(const JobState& job, const WindowSummaryRow& row);
  void LowerWindowPriority();
  void WarnSlowTick(double seconds, const TickCost& cost);
  void ApplyMetricsRetention(const JobSummary& s, uint64_t now);
  // Credentials from the options (files read now); the identity socket
  // follows once the port is known (StartIdentity).
  absl::Status SetUpAccess(const EngineOptions& o);
  absl::Status StartIdentity(const EngineOptions& o);
  // The history database (modes, page limit, retry buffer), the jobs it
  // holds, and /healthz and the metrics that tell of its writes.
  absl::Status OpenStore(const EngineOptions& o);
  // Diagnosis delivery (Alertmanager, webhook); none when neither is set.
  void StartNotifier(const EngineOptions& o, const HttpAuth& am_auth, const HttpAuth& webhook_auth);

  // Engine replicas (engine_replica.cc).
  static absl::Status CheckReplicaOptions(const EngineOptions& o);
  // Registers the replica's lease and starts serving jobs (after the
  // server is listening: the advertised address needs its port).
  absl::Status StartReplica(const EngineOptions& o);
  // Ingest's router: which replica serves `job` (claims it when free).
  JobRoute Route(const std::string& job);
  // Ownership callbacks: a job claimed (load what the tracker continues),
  // jobs lost to other replicas, this replica id taken over elsewhere.
  absl::Status TakeOver(const std::string& job);
  void OnJobsLost(const std::vector<std::string>& jobs);
  void OnReplaced(const absl::Status& why);
  // On the window thread, before the tracker runs: applies takeovers and
  // losses queued by the callbacks above.
  void ApplyReplicaChanges();
  // A job retired here: its lease row goes once its last rows are written.
  void ReleaseJob(const std::string& job);
  // Every replica of the database (`xpu status`); empty for a lone engine.
  std::vector<xpu::v1::ReplicaInfo> ListReplicas();

  EngineOptions options_;
  std::string engine_id_;
  Registry registry_;
  Metrics metrics_;
  std::unique_ptr<history::Store> store_;
  // Before every service: they check each call with it.
  std::unique_ptr<auth::Authorizer> authorizer_;
  std::unique_ptr<auth::LocalIdentityServer> identity_;
  std::unique_ptr<hang::HangMonitor> hang_;  // before detectors_: HangDetector points into it
  std::unique_ptr<hang::HangService> hang_service_;
  // Before detectors_: DifferentialLocalizationDetector points into it.
  std::unique_ptr<profile::ProfileMonitor> profile_;
  std::unique_ptr<profile::ProfileService> profile_service_;
  std::vector<std::unique_ptr<Detector>> detectors_;
  std::vector<double> detector_seconds_;                 // by detector: its last OnWindow's seconds
  std::shared_ptr<WindowViews> views_;                   // shared by the slowdown detectors
  std::shared_ptr<history::HistoryCache> history_;       // previous runs, calibrations
  std::unique_ptr<history::BaselineRecorder> recorder_;  // healthy windows -> store
  std::unique_ptr<history::HistoryService> history_service_;
  std::unique_ptr<DiagnosisTracker> tracker_;
  std::unique_ptr<DiagnosisMetrics> diagnosis_metrics_;
  std::unique_ptr<AlertNotifier> notifier_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<QueryService> query_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  int64_t admin_gid_ = -1;

  std::unique_ptr<replica::Ownership> ownership_;
  std::atomic<replica::Ownership*> serving_{nullptr};  // null: not (or no longer) serving
  struct Takeover {
    std::string job;
    std::vector<std::pair<Diagnosis, bool>> active;  // with: firing delivered
    std::vector<ResolvedDiagnosis> resolutions;      // firing delivered, resolution not
  };
  std::mutex replica_mu_;
  std::vector<Takeover> takeovers_;  // guarded by replica_mu_
  std::set<std::string> lost_;       // guarded by replica_mu_

  std::mutex tick_mu_;                                      // one window step at a time
  std::map<std::string, std::set<std::string>> busbw_ops_;  // job -> ops with a series
  // Job of more than figures.gauge_max_ranks ranks -> the ranks whose
  // xpu_rank_last_record_age_seconds is shown (the oldest; PublishRankAges).
  std::map<std::string, std::set<std::string>> aged_ranks_;
  std::shared_ptr<const DetectorConfig> detector_config_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  absl::Status exit_status_;  // guarded by mu_
  std::thread window_thread_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ENGINE_H_
