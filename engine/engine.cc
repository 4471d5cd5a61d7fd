#include "engine/engine.h"

#include <signal.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "engine/alerting/http_client.h"
#include "engine/detectors/rank_liveness.h"
#include "engine/detectors/slowdown_detectors.h"
#include "engine/hang/hang_detector.h"
#include "engine/history/history.h"
#include "engine/profile/differential_localization.h"

namespace xpu::engine {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("engine");
  return log;
}

// Finished jobs stay in memory (ranks, rings, collective table) this long
// for post-mortem queries, then live on in SQLite only.
constexpr uint64_t kRetainFinishedNs = 3600ull * 1000000000ull;

std::string MakeEngineId(uint64_t now_ns) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, ":", getpid(), ":", now_ns / 1000000000ull);
}

// Where daemons reach this engine: --listen with the port the server bound,
// and this host's name in place of a wildcard address.
std::string DefaultAdvertiseAddress(const std::string& listen, int port) {
  if (listen.rfind("unix:", 0) == 0 || listen.rfind("unix-abstract:", 0) == 0) return listen;
  std::string host = listen;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string::npos) {
    host = host.substr(0, colon);
  }
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

Engine::Engine(const EngineOptions& o, Clock clock)
    : options_(o),
      registry_(std::move(clock), static_cast<uint64_t>(o.silent_after_s * 1e9),
                static_cast<size_t>(o.ring_records)) {}

namespace {

// The gRPC server's credentials: TLS from the files given (client
// certificates required and verified when a client CA is given), else
// insecure.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const EngineOptions& o) {
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  XPU_ASSIGN_OR_RETURN(const std::string cert, ReadSecretFile(o.tls_cert, "TLS certificate"));
  XPU_ASSIGN_OR_RETURN(const std::string key, ReadSecretFile(o.tls_key, "TLS key"));
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (!o.tls_client_ca.empty()) {
    XPU_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadSecretFile(o.tls_client_ca, "TLS client CA"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// What the webhook delivered is recorded, so that a replica taking the job
// over does not deliver it again.
auto RecordDeliveries(history::Store* store) {
  return [store](const std::vector<DeliveredEvent>& evs) {
    for (const DeliveredEvent& ev : evs) {
      store->EnqueueAlertDelivery(history::AlertDelivery{ev.job, ev.kind, ev.subject,
                                                         ev.first_seen_ns, ev.status,
                                                         RealtimeNs()});
    }
  };
}

// The store's row of one rank.
history::RankRow RankRowOf(const std::string& job, const std::string& key, const ProcessState& p) {
  history::RankRow r;
  r.job = job;
  r.key = key;
  r.rank = p.identity.rank();
  r.host = p.identity.host();
  r.pid = p.identity.pid();
  r.local_rank = p.identity.local_rank();
  r.liveness = std::string(LivenessName(p.liveness));
  r.records = p.records;
  r.dropped = p.dropped;
  r.last_record_ns = p.last_record_ns;
  r.last_seen_ns = p.last_seen_ns;
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(const EngineOptions& o, Clock clock) {
  XPU_RETURN_IF_ERROR(ValidateSecurity(o));
  std::string token;
  if (!o.token_file.empty()) {
    XPU_ASSIGN_OR_RETURN(token, ReadSecretFile(o.token_file, "token file"));
  }
  // Slowdown-detector thresholds and notification URLs are checked before
  // anything starts, so that a bad flag is a plain error.
  auto config = std::make_shared<DetectorConfig>();
  if (!o.detector_config.empty()) {
    XPU_ASSIGN_OR_RETURN(*config, DetectorConfig::Load(o.detector_config));
  }
  for (const std::string& url : {o.alertmanager_url, o.webhook_url}) {
    if (url.empty()) continue;
    if (absl::StatusOr<HttpUrl> u = ParseHttpUrl(url); !u.ok()) return u.status();
  }
  absl::StatusOr<HttpAuth> alertmanager_auth = ReadHttpAuth(
      o.alertmanager_basic_auth_file, o.alertmanager_bearer_token_file, "Alertmanager");
  if (!alertmanager_auth.ok()) return alertmanager_auth.status();
  absl::StatusOr<HttpAuth> webhook_auth =
      ReadHttpAuth(o.webhook_basic_auth_file, o.webhook_bearer_token_file, "webhook");
  if (!webhook_auth.ok()) return webhook_auth.status();
  if ((!alertmanager_auth->empty() && o.alertmanager_url.empty()) ||
      (!webhook_auth->empty() && o.webhook_url.empty())) {
    return absl::InvalidArgumentError(
        "credentials given for a receiver without its URL (--alertmanager-url, --webhook-url)");
  }
  std::unique_ptr<Engine> e(new Engine(o, std::move(clock)));
  const uint64_t start_ns = e->registry_.Now();
  e->engine_id_ = MakeEngineId(start_ns);

  XPU_ASSIGN_OR_RETURN(e->store_, history::Store::Open(o.db));
  XPU_ASSIGN_OR_RETURN(const std::vector<JobSummary> jobs, e->store_->LoadJobs());
  for (const JobSummary& j : jobs) e->registry_.AddHistoricalJob(j);

  e->detectors_.push_back(std::make_unique<RankLivenessDetector>(e->registry_.silent_after_ns()));
  // Hang diagnosis (engine/hang/): its findings enter the window tick.
  e->hang_ = std::make_unique<hang::HangMonitor>(
      e->registry_,
      [p = e.get()](const std::string& id, xpu::v1::Command c) {
        return p->SendCommand(id, std::move(c));
      },
      hang::HangMonitorOptionsFromEnv());
  e->detectors_.push_back(std::make_unique<hang::HangDetector>(e->hang_.get()));
  // Differential localization with a profiling window (engine/profile/):
  // started by a throughput regression (TickWindow) or `xpu profile`.
  e->profile_ = std::make_unique<profile::ProfileMonitor>(
      e->registry_,
      [p = e.get()](const std::string& id, xpu::v1::Command c) {
        return p->SendCommand(id, std::move(c));
      },
      profile::ProfileMonitorOptionsFromEnv());
  e->detectors_.push_back(
      std::make_unique<profile::DifferentialLocalizationDetector>(e->profile_.get()));
  // History across runs (engine/history/): detectors read previous runs and
  // calibrations through the cache; the recorder stores healthy windows.
  e->history_ = std::make_shared<history::HistoryCache>(
      std::make_shared<history::StoreHistorySource>(e->store_.get()), config);
  e->views_ = AddSlowdownDetectors(config, &e->detectors_, e->history_);
  e->recorder_ = std::make_unique<history::BaselineRecorder>(
      e->views_, config, [store = e->store_.get()](const history::RunBaseline& run, int keep) {
        store->EnqueueRunBaseline(run, keep);
      });
  auto figures = std::make_unique<FiguresExporter>(e->views_, config, e->metrics_.registry());
  e->figures_ = figures.get();
  e->detectors_.push_back(std::move(figures));
  e->tracker_ = std::make_unique<DiagnosisTracker>(static_cast<int>(o.resolve_after_windows));
  e->diagnosis_metrics_ = std::make_unique<DiagnosisMetrics>(e->metrics_.registry());
  if (!o.alertmanager_url.empty() || !o.webhook_url.empty()) {
    AlertNotifierOptions no;
    no.alertmanager_url = o.alertmanager_url;
    no.webhook_url = o.webhook_url;
    no.alertmanager_auth = *alertmanager_auth;
    no.webhook_auth = *webhook_auth;
    no.ca_file = o.alert_tls_ca;
    no.alert_ttl_s = std::max(300.0, 5 * o.window_s);
    no.on_webhook_delivered = RecordDeliveries(e->store_.get());
    e->notifier_ = std::make_unique<AlertNotifier>(no, e->metrics_.registry());
  }

  if (o.metrics_addr != "off" && !o.metrics_addr.empty()) {
    XPU_RETURN_IF_ERROR(e->metrics_.Serve(o.metrics_addr));
  }

  e->ingest_ = std::make_unique<IngestService>(e->registry_, e->metrics_, token, e->engine_id_);
  e->query_ = std::make_unique<QueryService>(e->registry_, e->metrics_, e->store_.get(), token,
                                             e->engine_id_, flags::Version(), start_ns);
  e->query_->SetCommandSender(
      [ingest = e->ingest_.get()](const std::string& id, xpu::v1::Command c) {
        return ingest->SendCommand(id, std::move(c));
      });
  XPU_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, ServerCredentials(o));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen, creds, &e->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_receive_bytes));
  builder.RegisterService(e->ingest_.get());
  builder.RegisterService(e->query_.get());
  e->hang_service_ = std::make_unique<hang::HangService>(*e->hang_, token);
  builder.RegisterService(e->hang_service_.get());
  e->profile_service_ = std::make_unique<profile::ProfileService>(*e->profile_, token);
  builder.RegisterService(e->profile_service_.get());
  e->history_service_ = std::make_unique<history::HistoryService>(e->store_.get(), token);
  builder.RegisterService(e->history_service_.get());
  e->server_ = builder.BuildAndStart();
  if (!e->server_ || e->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen, " (address in use or not resolvable)"));
  }
  XPU_RETURN_IF_ERROR(e->StartReplica(o));
  e->window_thread_ = std::thread([p = e.get()] { p->WindowLoop(); });
  e->hang_->Start();
  Log()->info("xpu-engine {} (replica {}) listening on {} (port {}), metrics on port {}, db {}",
              e->engine_id_, e->replica_id_, o.listen, e->port_, e->metrics_.port(),
              history::RedactDb(o.db));
  return e;
}

absl::Status Engine::StartReplica(const EngineOptions& o) {
  replica::OwnershipOptions ro;
  ro.address = o.advertise_addr.empty() ? DefaultAdvertiseAddress(o.listen, port_)
                                        : o.advertise_addr;
  ro.replica_id = o.replica_id.empty() ? ro.address : o.replica_id;
  ro.instance = engine_id_;
  ro.version = flags::Version();
  ro.lease_ttl_s = o.lease_ttl_s > 0 ? o.lease_ttl_s : o.window_s / 2;
  replica_id_ = ro.replica_id;
  XPU_ASSIGN_OR_RETURN(std::unique_ptr<history::Leases> leases, history::Leases::Open(o.db));
  replica_metrics_ = std::make_unique<replica::ReplicaMetrics>(metrics_.registry());
  ownership_ = std::make_unique<replica::Ownership>(std::move(leases), ro);
  XPU_RETURN_IF_ERROR(ownership_->Start(
      [this](const std::string& job) { return TakeOver(job); },
      [this](const std::vector<std::string>& jobs) { OnJobsLost(jobs); },
      [this](const absl::Status& why) { OnReplaced(why); }));
  store_->SetFencingOwner(replica_id_);
  ingest_->SetOwnership(ownership_.get(), replica_id_, replica_metrics_.get());
  query_->SetReplicas(replica_id_, [this] { return ownership_->leases().Replicas(); });
  return absl::OkStatus();
}

absl::Status Engine::exit_status() {
  std::lock_guard<std::mutex> l(mu_);
  return exit_status_;
}

absl::Status Engine::TakeOver(const std::string& job) {
  XPU_ASSIGN_OR_RETURN(replica::JobTakeover t, replica::LoadTakeover(*store_, job));
  const bool existed = registry_.FindJob(job) != nullptr;
  std::shared_ptr<JobState> js =
      registry_.GetOrCreateJob(job, t.summary ? t.summary->job_name : std::string());
  {
    std::lock_guard<std::mutex> l(js->mu());
    if (t.summary && !existed) {
      js->CarryOver(t.summary->first_seen_ns, t.summary->records, t.rank_records);
    }
    for (const auto& [stream, seq] : t.stream_seqs) {
      uint64_t& mine = js->stream_seq()[stream];
      mine = std::max(mine, seq);
    }
  }
  if (t.summary) {
    Log()->info("job {}: loaded from the database ({} records, {} active diagnoses, {} streams)",
                job, t.summary->records, t.active.size(), t.stream_seqs.size());
  }
  replica_metrics_->AddTakenOver();
  std::lock_guard<std::mutex> l(replica_mu_);
  lost_jobs_.erase(job);
  takeovers_.push_back(std::move(t));
  return absl::OkStatus();
}

void Engine::OnJobsLost(const std::vector<std::string>& jobs) {
  replica_metrics_->AddLost(jobs.size());
  for (const std::string& job : jobs) {
    registry_.DropJob(job);
    std::optional<history::JobOwner> owner = ownership_->OwnerOf(job);
    Log()->warn("job {} is served by replica {} now; dropped here, its daemons redirected", job,
                owner ? owner->owner : std::string("(unknown)"));
    if (owner && !owner->address.empty() && ingest_) {
      ingest_->RedirectJob(job, owner->owner, owner->address);
    }
  }
  std::lock_guard<std::mutex> l(replica_mu_);
  lost_jobs_.insert(jobs.begin(), jobs.end());
}

void Engine::OnReplaced(const absl::Status& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    exit_status_ = why;
  }
  // main() waits for SIGTERM on its signal thread: this ends it the same way.
  Log()->error("stopping: {}", std::string(why.message()));
  kill(getpid(), SIGTERM);
}

void Engine::ApplyReplicaChanges() {
  std::vector<replica::JobTakeover> takeovers;
  std::set<std::string> lost;
  {
    std::lock_guard<std::mutex> l(replica_mu_);
    takeovers.swap(takeovers_);
    lost.swap(lost_jobs_);
  }
  for (const std::string& job : lost) {
    if (tracker_) tracker_->Forget(job);
    written_seqs_.erase(job);
    busbw_ops_.erase(job);
  }
  for (replica::JobTakeover& t : takeovers) {
    if (tracker_) {
      for (const replica::JobTakeover::Active& a : t.active)
        tracker_->Seed(a.diagnosis, a.firing_delivered);
      for (const ResolvedDiagnosis& r : t.undelivered_resolutions) tracker_->SeedResolved(r);
    }
    if (recorder_ && t.baseline) recorder_->Seed(*t.baseline);
    written_seqs_[t.job] = t.stream_seqs;
  }
}

void Engine::OnWindowCommitted(const history::BarrierResult& r,
                               const std::vector<IngestService::AckPoint>& acks) {
  {
    std::lock_guard<std::mutex> l(replica_mu_);
    if (!acks_enabled_) return;
  }
  // Redirects first: a daemon moves the lost jobs' batches before the ack
  // lets it forget the rest.
  if (!r.fenced_jobs.empty() && ownership_) {
    ownership_->MarkLost(std::vector<std::string>(r.fenced_jobs.begin(), r.fenced_jobs.end()));
  }
  if (r.status.ok() && ingest_) ingest_->Acknowledge(acks);
}

Engine::~Engine() {
  Shutdown();
  // The store's writer may still run barrier callbacks into the ingest:
  // it goes first.
  store_.reset();
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  cv_.notify_all();
  if (window_thread_.joinable()) window_thread_.join();
  if (ingest_) ingest_->FailAllPending(absl::UnavailableError("engine shutting down"));
  if (hang_) hang_->Stop();
  if (profile_) profile_->Stop();  // its windows were just failed by the ingest
  // Persist the final picture while the daemons are still connected (they
  // hear that it is committed), then end the lease so that another replica
  // can take the jobs at once, then disconnect them.
  if (store_) {
    TickWindow();
    store_->Flush().IgnoreError();
  }
  {
    std::lock_guard<std::mutex> l(replica_mu_);
    acks_enabled_ = false;
  }
  if (ownership_) ownership_->Stop(/*resign=*/true);
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics_.StopServing();
}

void Engine::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stopping_; });
}

void Engine::WindowLoop() {
  const auto period = std::chrono::milliseconds(static_cast<int64_t>(options_.window_s * 1000));
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    if (cv_.wait_for(l, period, [&] { return stopping_; })) break;
    l.unlock();
    TickWindow();
    l.lock();
  }
}

std::vector<Diagnosis> Engine::TickWindow() {
  std::lock_guard<std::mutex> tick(tick_mu_);
  ApplyReplicaChanges();
  // Taken before any window closes: every batch counted here is in a window
  // closed below, so it is committed when this tick's rows are.
  std::vector<IngestService::AckPoint> acks;
  if (ingest_) acks = ingest_->SnapshotBatches();
  registry_.UpdateLiveness();
  const uint64_t now = registry_.Now();
  std::vector<Diagnosis> all;
  std::set<std::string> ticked;
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    VectorSink sink;
    WindowSummaryRow row;
    JobSummary summary;
    std::vector<history::RankRow> ranks;
    std::vector<history::StreamSeqRow> seqs;
    {
      std::lock_guard<std::mutex> l(job->mu());
      row = job->CloseWindow(now);
      std::map<std::string, uint64_t>& written = written_seqs_[job->job()];
      for (const auto& [stream, seq] : job->stream_seq()) {
        uint64_t& w = written[stream];
        if (seq > w) {
          seqs.push_back(history::StreamSeqRow{job->job(), stream, seq, now});
          w = seq;
        }
      }
      for (auto& d : detectors_) d->OnWindow(*job, sink);
      if (recorder_) recorder_->OnWindow(*job, sink.out, now);
      summary = Summarize(*job);
      size_t by_state[3] = {0, 0, 0};
      for (const auto& [key, p] : job->processes()) {
        by_state[static_cast<int>(p->liveness)]++;
        uint64_t last = std::max(p->last_record_rx_ns, p->first_seen_ns);
        metrics_.SetRankLastRecordAge(
            job->job(), p->identity.rank() >= 0 ? std::to_string(p->identity.rank()) : key,
            now > last ? (now - last) * 1e-9 : 0);
        ranks.push_back(RankRowOf(job->job(), key, *p));
      }
      for (Liveness lv : {Liveness::kAlive, Liveness::kSilent, Liveness::kExited}) {
        metrics_.SetJobRanks(job->job(), LivenessName(lv), by_state[static_cast<int>(lv)]);
      }
    }
    std::set<std::string>& ops = busbw_ops_[job->job()];
    std::set<std::string> now_ops;
    for (const CollectiveWindowRow& c : row.collectives) {
      metrics_.SetCollectiveBusBw(job->job(), c.op, c.bw.BusBw());
      now_ops.insert(c.op);
    }
    for (const std::string& op : ops) {
      // No completed collective of this op in the window: no figure, rather
      // than a misleading zero or a stale value.
      if (!now_ops.count(op)) metrics_.RemoveCollectiveBusBw(job->job(), op);
    }
    ops = std::move(now_ops);
    store_->EnqueueJob(summary);
    for (const history::RankRow& r : ranks) store_->EnqueueRank(r);
    if (row.records > 0 || !row.collectives.empty()) store_->EnqueueWindow(row);
    // After the window: whoever reads a stream's seq finds its records.
    for (const history::StreamSeqRow& q : seqs) store_->EnqueueStreamSeq(q);
    for (Diagnosis& d : sink.out) all.push_back(std::move(d));
    ticked.insert(job->job());
  }
  // A throughput regression starts a profiling window (rate-limited per job
  // by the monitor), whose localization the next windows report.
  if (profile_) {
    for (const Diagnosis& d : all) {
      if (d.kind == "throughput_regression") profile_->OnThroughputRegression(d.job, now);
    }
  }
  for (const DaemonState& d : registry_.Daemons()) store_->EnqueueDaemon(d);
  for (const std::string& job : registry_.RetireFinishedJobs(kRetainFinishedNs)) {
    busbw_ops_.erase(job);
    written_seqs_.erase(job);
    if (ownership_) {
      store_->EnqueueRelease(job, replica_id_);
      ownership_->Released(job);
    }
    Log()->info("job {} finished; kept in history only", job);
  }
  // Diagnosis lifecycle: persisting findings keep their first_seen, absent
  // ones resolve; then history, metrics and notifications.
  std::set<std::string> alive;
  std::vector<std::string> alive_list;
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    alive.insert(job->job());
    alive_list.push_back(job->job());
  }
  if (!tracker_) {  // Start() failed before the detectors were set up
    for (const Diagnosis& d : all) store_->EnqueueDiagnosis(d);
    if (ingest_) ingest_->ExpirePending();
    return all;
  }

  TrackerUpdate update = tracker_->Update(&all, ticked, alive, now);
  for (const Diagnosis& d : all) store_->EnqueueDiagnosis(d);
  for (const ResolvedDiagnosis& r : update.resolved) {
    store_->EnqueueDiagnosisResolution(history::DiagnosisResolution{
        r.diagnosis.job, r.diagnosis.kind, r.diagnosis.subject, r.resolved_ns});
  }
  diagnosis_metrics_->Apply(update, alive);
  if (notifier_) notifier_->Publish(update, now);
  views_->Retain(alive_list);
  history_->Retain(alive_list);
  recorder_->Retain(alive_list);
  figures_->Retain(alive_list);
  // Once this tick's rows are committed, the daemons may forget its batches.
  store_->EnqueueBarrier([this, acks = std::move(acks)](const history::BarrierResult& r) {
    OnWindowCommitted(r, acks);
  });
  if (ingest_) ingest_->ExpirePending();
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  if (replica_metrics_) {
    replica_metrics_->SetStore(store_->write_stats());
    if (ownership_) replica_metrics_->SetJobs(ownership_->Served().size());
  }
  return all;
}

}  // namespace xpu::engine
