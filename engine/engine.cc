#include "engine/engine.h"

#include <grp.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "common/rpc/local_identity.h"
#include "engine/alerting/http_client.h"
#include "engine/detectors/cause_first.h"
#include "engine/detectors/rank_liveness.h"
#include "engine/detectors/slowdown_detectors.h"
#include "engine/hang/fold_silence.h"
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
// The engine pings each daemon stream after this long without a frame from
// it, and closes the stream when the ping is not answered within the
// timeout.
constexpr int kStreamKeepaliveMs = 20000;
constexpr int kStreamKeepaliveTimeoutMs = 10000;
// At most one line a minute about late records (NoteLateRecords): the
// counter has them all.
logging::RateLimiter g_late_log(1, 60000000000ull);

// The daemon streams' transport settings.
void SetStreamArguments(const EngineOptions& o, grpc::ServerBuilder* builder) {
  // Each daemon stream holds a TCP read buffer that grows towards the
  // largest read (up to 4 MiB by default) and is kept while the stream is
  // idle: with thousands of streams that is most of the engine's memory per
  // stream. Reads of at most this size; a larger message takes several
  // reads, nothing is refused (docs/scale.md, "Memory").
  builder->AddChannelArgument(GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE,
                              static_cast<int>(o.tcp_read_chunk_bytes));
  // A daemon that stops answering (its host or process frozen) loses its
  // stream within keepalive time + timeout: until then the silence of its
  // ranks counts only as far as its last batch (ProcessState::SeenUntilNs).
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kStreamKeepaliveMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kStreamKeepaliveTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

std::string MakeEngineId(uint64_t now_ns) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, ":", getpid(), ":", now_ns / 1000000000ull);
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

bool AnyToken(const EngineOptions& o) {
  return !o.token_file.empty() || !o.read_token_file.empty() || !o.act_token_file.empty() ||
         !o.admin_token_file.empty() || !o.ingest_token_file.empty();
}

IngestLimits LimitsFrom(const EngineOptions& o) {
  IngestLimits limits;
  limits.max_jobs = o.max_jobs;
  limits.max_ranks_per_job = o.max_ranks_per_job;
  limits.max_processes_per_stream = o.max_processes_per_stream;
  limits.max_job_buffer_bytes = o.max_job_buffer_mb << 20;
  limits.max_queued_writes = o.max_queued_writes;
  return limits;
}

absl::StatusOr<int64_t> GroupId(const std::string& name, const char* flag) {
  if (name.empty()) return -1;
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no group '", name, "'"));
  }
  return static_cast<int64_t>(g.gr_gid);
}

}  // namespace

absl::Status Engine::SetUpAccess(const EngineOptions& o) {
  auth::AuthorizerOptions a;
  const std::pair<const std::string*, std::string*> files[] = {
      {&o.token_file, &a.shared_token},
      {&o.read_token_file, &a.read_token},
      {&o.act_token_file, &a.act_token},
      {&o.admin_token_file, &a.admin_token},
      {&o.ingest_token_file, &a.ingest_token}};
  for (const auto& [file, secret] : files) {
    if (file->empty()) continue;
    XPU_ASSIGN_OR_RETURN(*secret, ReadSecretFile(*file, "token file"));
  }
  a.certificate_roles = !o.tls_client_ca.empty();
  XPU_ASSIGN_OR_RETURN(admin_gid_, GroupId(o.admin_group, "--admin-group"));
  authorizer_ = std::make_unique<auth::Authorizer>(
      a, nullptr, [r = &registry_](const std::string& job) { return r->JobOwner(job); },
      [r = &registry_] { return r->Now(); });
  return absl::OkStatus();
}

absl::Status Engine::StartIdentity(const EngineOptions& o) {
  if (o.identity_socket == "off") return absl::OkStatus();
  const std::string name = o.identity_socket == "auto" || o.identity_socket.empty()
                               ? rpc::LocalIdentityName(port_)
                               : o.identity_socket;
  XPU_ASSIGN_OR_RETURN(
      identity_, auth::LocalIdentityServer::Start(name, admin_gid_,
                                                  static_cast<uint64_t>(o.identity_ttl_s * 1e9)));
  authorizer_->SetLocalIdentity(identity_.get());
  return absl::OkStatus();
}

namespace {

// History of a job from before a restart, for the registry's seeder.
JobSeed SeedFromStore(history::Store* store, const std::string& job) {
  absl::StatusOr<JobSeed> seed = store->LoadJobSeed(job);
  if (!seed.ok()) {
    Log()->warn("job {}: history unreadable ({}); its counts start from zero", job,
                seed.status().ToString());
    return JobSeed{};
  }
  return *std::move(seed);
}

}  // namespace

absl::Status Engine::OpenStore(const EngineOptions& o) {
  history::StoreOptions so;
  XPU_ASSIGN_OR_RETURN(so.file_gid, GroupId(o.db_group, "--db-group"));
  so.file_mode = so.file_gid >= 0 ? 0640 : 0600;
  so.max_db_bytes = o.db_max_mb << 20;
  so.max_pending_rows = o.db_retry_rows;
  XPU_ASSIGN_OR_RETURN(store_, history::Store::Open(o.db, so));
  XPU_ASSIGN_OR_RETURN(const std::vector<JobSummary> jobs, store_->LoadJobs());
  for (const JobSummary& j : jobs) registry_.AddHistoricalJob(j);
  registry_.SetJobSeeder(
      [store = store_.get()](const std::string& job) { return SeedFromStore(store, job); });
  metrics_.SetRefresh([store = store_.get(), m = &metrics_] {
    const history::StoreStatus st = store->Status();
    m->SetStore(st.degraded, st.write_failures, st.rows_pending, st.rows_dropped);
  });
  metrics_.SetHealthCheck([store = store_.get()] {
    const history::StoreStatus st = store->Status();
    if (!st.degraded) return std::string("ok");
    return absl::StrCat("degraded: history writes failing (", st.error, "); ", st.rows_pending,
                        " rows waiting, ", st.rows_dropped, " dropped");
  });
  return absl::OkStatus();
}

namespace {

// Receivers' URLs and credential files, checked before anything starts so
// that a bad flag is a plain error.
absl::Status ReadReceivers(const EngineOptions& o, HttpAuth* alertmanager, HttpAuth* webhook) {
  for (const std::string& url : {o.alertmanager_url, o.webhook_url}) {
    if (url.empty()) continue;
    if (absl::StatusOr<HttpUrl> u = ParseHttpUrl(url); !u.ok()) return u.status();
  }
  XPU_ASSIGN_OR_RETURN(
      *alertmanager, ReadHttpAuth(o.alertmanager_basic_auth_file, o.alertmanager_bearer_token_file,
                                  "Alertmanager"));
  XPU_ASSIGN_OR_RETURN(
      *webhook, ReadHttpAuth(o.webhook_basic_auth_file, o.webhook_bearer_token_file, "webhook"));
  if ((!alertmanager->empty() && o.alertmanager_url.empty()) ||
      (!webhook->empty() && o.webhook_url.empty())) {
    return absl::InvalidArgumentError(
        "credentials given for a receiver without its URL (--alertmanager-url, --webhook-url)");
  }
  return absl::OkStatus();
}

}  // namespace

void Engine::StartNotifier(const EngineOptions& o, const HttpAuth& am_auth,
                           const HttpAuth& webhook_auth) {
  if (o.alertmanager_url.empty() && o.webhook_url.empty()) return;
  AlertNotifierOptions no;
  no.alertmanager_url = o.alertmanager_url;
  no.webhook_url = o.webhook_url;
  no.alertmanager_auth = am_auth;
  no.webhook_auth = webhook_auth;
  no.ca_file = o.alert_tls_ca;
  no.alert_ttl_s = std::max(300.0, 5 * o.window_s);
  no.links = AlertLinks{o.grafana_url, o.docs_url};
  if (!o.replica_id.empty()) {
    // What the webhook delivered, for a replica that takes a job over.
    no.on_webhook_delivered = [store = store_.get()](const std::vector<DeliveredEvent>& ev) {
      for (const DeliveredEvent& d : ev) {
        store->EnqueueAlertDelivery(history::AlertDelivery{
            d.job, d.kind, d.subject, d.first_seen_ns, d.status, RealtimeNs()});
      }
    };
  }
  notifier_ = std::make_unique<AlertNotifier>(no, metrics_.registry());
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(const EngineOptions& o, Clock clock) {
  XPU_RETURN_IF_ERROR(ValidateSecurity(o));
  XPU_RETURN_IF_ERROR(CheckReplicaOptions(o));
  // Slowdown-detector thresholds and notification URLs are checked before
  // anything starts, so that a bad flag is a plain error.
  auto config = std::make_shared<DetectorConfig>();
  if (!o.detector_config.empty()) {
    XPU_ASSIGN_OR_RETURN(*config, DetectorConfig::Load(o.detector_config));
  }
  HttpAuth am_auth, webhook_auth;
  XPU_RETURN_IF_ERROR(ReadReceivers(o, &am_auth, &webhook_auth));
  std::unique_ptr<Engine> e(new Engine(o, std::move(clock)));
  e->detector_config_ = config;
  const uint64_t start_ns = e->registry_.Now();
  e->engine_id_ = MakeEngineId(start_ns);

  XPU_RETURN_IF_ERROR(e->SetUpAccess(o));
  XPU_RETURN_IF_ERROR(e->OpenStore(o));

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
  e->detectors_.push_back(std::make_unique<FiguresExporter>(
      e->views_, config, e->metrics_.registry(), e->metrics_.series()));
  e->tracker_ = std::make_unique<DiagnosisTracker>(static_cast<int>(o.resolve_after_windows));
  e->diagnosis_metrics_ = std::make_unique<DiagnosisMetrics>(
      e->metrics_.registry(), e->metrics_.series(),
      [p = e.get()](const std::string& job) { return p->metrics_.LabelsOf(job)[kJobNameLabel]; });
  e->StartNotifier(o, am_auth, webhook_auth);

  if (o.metrics_addr != "off" && !o.metrics_addr.empty()) {
    XPU_RETURN_IF_ERROR(e->metrics_.Serve(o.metrics_addr));
  }

  e->ingest_ =
      std::make_unique<IngestService>(e->registry_, e->metrics_, *e->authorizer_, e->engine_id_,
                                      e->store_.get(), LimitsFrom(o), o.ingest_threads);
  if (!o.replica_id.empty()) {
    e->ingest_->SetRouter([p = e.get()](const std::string& job) { return p->Route(job); },
                          o.replica_id);
  }
  e->query_ =
      std::make_unique<QueryService>(e->registry_, e->metrics_, e->store_.get(), *e->authorizer_,
                                     e->engine_id_, flags::Version(), start_ns);
  if (!o.replica_id.empty()) {
    e->query_->SetReplicas(o.replica_id, [p = e.get()] { return p->ListReplicas(); });
  }
  e->query_->SetCommandSender(
      [ingest = e->ingest_.get()](const std::string& id, xpu::v1::Command c) {
        return ingest->SendCommand(id, std::move(c));
      });
  XPU_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, ServerCredentials(o));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen, creds, &e->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_receive_bytes));
  SetStreamArguments(o, &builder);
  builder.RegisterService(e->ingest_.get());
  builder.RegisterService(e->query_.get());
  e->hang_service_ = std::make_unique<hang::HangService>(*e->hang_, *e->authorizer_);
  builder.RegisterService(e->hang_service_.get());
  e->profile_service_ = std::make_unique<profile::ProfileService>(*e->profile_, *e->authorizer_);
  builder.RegisterService(e->profile_service_.get());
  e->history_service_ = std::make_unique<history::HistoryService>(e->store_.get(), *e->authorizer_);
  builder.RegisterService(e->history_service_.get());
  e->server_ = builder.BuildAndStart();
  if (!e->server_ || e->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen, " (address in use or not resolvable)"));
  }
  if (absl::Status st = e->StartIdentity(o); !st.ok()) {
    e->server_->Shutdown();
    return st;
  }
  if (absl::Status st = e->StartReplica(o); !st.ok()) {
    e->server_->Shutdown();
    return st;
  }
  e->window_thread_ = std::thread([p = e.get()] { p->WindowLoop(); });
  e->hang_->Start();
  Log()->info("xpu-engine {} listening on {} (port {}), metrics on port {}, db {}", e->engine_id_,
              o.listen, e->port_, e->metrics_.port(), history::RedactDb(o.db));
  Log()->info("access: local identity {}, tokens {}, client certificates {}",
              e->identity_ ? "@" + e->identity_->name() : std::string("off"),
              AnyToken(o) ? "configured" : "none",
              o.tls_client_ca.empty() ? "not required" : "required");
  return e;
}

Engine::~Engine() { Shutdown(); }

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
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // Persist the final picture.
  if (store_) {
    TickWindow();
    store_->Flush().IgnoreError();
  }
  // A clean stop ends the lease: the jobs move to the next replica their
  // daemons reach, at once.
  if (ownership_) ownership_->Stop(/*resign=*/exit_status().ok());
  metrics_.StopServing();
}

void Engine::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return stopping_; });
}

// The window thread's niceness, raised by --window-nice; the threads it
// starts (detectors, figures, the view's parts) inherit it (Linux: nice is
// per thread). Without it the detector threads of a large job take the
// ingest's cores for the whole tick, and the window's last batches land
// in the next one.
void Engine::LowerWindowPriority() {
  if (options_.window_nice <= 0) return;
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (errno == 0 &&
      setpriority(PRIO_PROCESS, static_cast<id_t>(tid), now + options_.window_nice) == 0) {
    Log()->debug("window tick threads at nice {}", now + options_.window_nice);
    return;
  }
  Log()->warn("--window-nice {}: could not lower the window thread's priority: {}",
              options_.window_nice, strerror(errno));
}

void Engine::WindowLoop() {
  // Windows end at multiples of the period since the Unix epoch, whatever
  // the start time or the length of a tick: every engine (and xpu-sim,
  // docs/scale.md) knows where a window ends, and a slow tick does not shift
  // the windows after it.
  // Each window is analysed --window-grace-s after its end, so that the
  // records that started before the end are in it though the ingest ran
  // behind (a 100k-rank job's tick takes most of the cores for most of the
  // window); the records that started after the end wait for the next.
  const int64_t period_ms = std::max<int64_t>(1, static_cast<int64_t>(options_.window_s * 1000));
  const int64_t grace_ms = static_cast<int64_t>(options_.WindowGraceS() * 1000);
  LowerWindowPriority();
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t end_ms = ((now_ms - grace_ms) / period_ms + 1) * period_ms;
    const std::chrono::system_clock::time_point next{std::chrono::milliseconds(end_ms + grace_ms)};
    if (cv_.wait_until(l, next, [&] { return stopping_; })) break;
    l.unlock();
    TickWindow(static_cast<uint64_t>(end_ms) * 1000000ull);
    l.lock();
  }
}

// A finished job's series leave /metrics once it has been over longer than
// the retention; the same job id running again brings them back.
void Engine::ApplyMetricsRetention(const JobSummary& s, uint64_t now) {
  const uint64_t retain_ns = static_cast<uint64_t>(options_.metrics_retain_finished_s * 1e9);
  if (s.state == "finished" && now > s.last_seen_ns && now - s.last_seen_ns >= retain_ns) {
    if (!metrics_.series().Retired(s.job)) {
      metrics_.RetireJob(s.job);
      Log()->info("job {} finished {:.0f} s ago: its series left /metrics", s.job,
                  (now - s.last_seen_ns) * 1e-9);
    }
  } else if (s.state != "finished") {
    metrics_.ReviveJob(s.job);
  }
}

void Engine::PublishRankAges(const std::string& job, std::vector<RankAge>* ages) {
  // A job of more than figures.gauge_max_ranks ranks shows the oldest
  // 2 x figures.standout_ranks: the ranks that may have stopped reporting.
  if (ages->size() <= static_cast<size_t>(detector_config_->Get("figures.gauge_max_ranks"))) {
    for (const RankAge& a : *ages) metrics_.SetRankLastRecordAge(job, a.label, a.identity, a.age_s);
    return;
  }
  auto [shown, fresh] = aged_ranks_.try_emplace(job);
  if (fresh) {
    // Once: the gauges of every rank, made while the job was smaller.
    for (const RankAge& a : *ages) metrics_.RemoveRankLastRecordAge(job, a.label);
  }
  const auto k = static_cast<long>(
      std::min<double>(static_cast<double>(ages->size()),
                       std::max(0.0, 2 * detector_config_->Get("figures.standout_ranks"))));
  std::partial_sort(ages->begin(), ages->begin() + k, ages->end(),
                    [](const RankAge& a, const RankAge& b) { return a.age_s > b.age_s; });
  std::set<std::string> now;
  for (auto it = ages->begin(); it != ages->begin() + k; ++it) {
    metrics_.SetRankLastRecordAge(job, it->label, it->identity, it->age_s);
    now.insert(it->label);
  }
  for (const std::string& label : shown->second) {
    if (!now.count(label)) metrics_.RemoveRankLastRecordAge(job, label);
  }
  shown->second = std::move(now);
}

// One job's part of a window tick: close its window, run the detectors
// (each one's time added to `cost`), queue its history rows. Returns the
// job's findings; `finished` tells whether the job has finished.
//
// The job's lock is held while the window is closed and copied into its
// view and while the detectors that read the job itself run, then again
// while its rank rows are copied; not while the detectors that read only
// the view run (the longest part at scale), so that the job's records go
// on being applied meanwhile (a 100k-rank job's tick once held it for tens
// of seconds, and its ranks looked silent).
std::vector<Diagnosis> Engine::TickJob(JobState& job_state, uint64_t now, uint64_t end,
                                       WindowCut cut, TickCost* cost, bool* finished) {
  JobState* job = &job_state;
  auto t = std::chrono::steady_clock::now();
  auto lap = [&t, cost](std::string_view what) {
    const auto now = std::chrono::steady_clock::now();
    cost->seconds[what] += std::chrono::duration<double>(now - t).count();
    t = now;
  };
  std::vector<VectorSink> sinks(detectors_.size());
  std::array<JobState::TickHold, JobState::kTickHolds> held;
  WindowSummaryRow row;
  {
    std::lock_guard<std::mutex> l(job->mu());
    held[0].from_ns = registry_.Now();
    ApplyMetricsRetention(Summarize(*job), now);
    row = job->CloseWindow(end);
    NoteLateRecords(*job, row);
    t = std::chrono::steady_clock::now();
    if (views_) {  // rings cut as copied: records held once
      views_->BuildAndTrim(*job, kRingTailRecords, kPaceTailRecords, options_.detector_threads,
                           cut);
    }
    job->TrimRings();  // (cut already) counts the rings' memory
    lap("window view");
    if (history_) history_->Prepare(*job);
    lap("history");
    RunDetectors(*job, /*with_lock=*/true, &sinks, cost);
    held[0].until_ns = registry_.Now();
  }
  // A large job's baseline figures are measured beside the detectors that
  // read the view (they read it too, for seconds at 100k ranks); they are
  // kept after them if the window was healthy.
  std::future<history::BaselineRecorder::WindowFigures> figures;
  const WindowView* view = recorder_ && views_ ? &views_->Get(*job) : nullptr;
  if (view != nullptr && options_.detector_threads > 1 &&
      view->ranks.size() >= static_cast<size_t>(options_.detector_parallel_min_ranks)) {
    // Every rank's figures first (steps, void, GEMMs): the view finds a
    // rank's figures when first asked, which is no read two threads may do
    // at once.
    const auto s0 = std::chrono::steady_clock::now();
    view->FindAll(options_.detector_threads);
    cost->seconds["rank figures"] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    figures = std::async(std::launch::async, [this, job] { return recorder_->Measure(*job); });
  }
  RunDetectors(*job, /*with_lock=*/false, &sinks, cost);
  t = std::chrono::steady_clock::now();
  VectorSink sink;
  for (VectorSink& s : sinks) {  // the detectors' order
    for (Diagnosis& d : s.out) sink.out.push_back(std::move(d));
  }
  hang::FoldSilenceIntoHang(&sink.out);   // a hung job's silence is the hang's
  FoldSymptomsIntoCauses(&sink.out);      // a symptom a cause explains is the cause's
  RouteRegressionsCauseFirst(&sink.out);  // a regression goes where its cause goes
  if (figures.valid()) {
    recorder_->Take(*job, figures.get(), sink.out, now);
  } else if (recorder_) {
    recorder_->OnWindow(*job, sink.out, now);
  }
  // The window's records were read: give their memory back.
  if (views_) views_->Release(job->job());
  lap("baseline recorder");
  JobSummary summary;
  std::vector<history::RankRow> ranks;
  std::vector<RankAge> ages;
  size_t by_state[3] = {0, 0, 0};
  {
    std::lock_guard<std::mutex> l(job->mu());
    held[1].from_ns = registry_.Now();
    summary = Summarize(*job);
    cost->processes += job->processes().size();
    ranks.reserve(job->processes().size());
    ages.reserve(job->processes().size());
    for (const auto& [key, p] : job->processes()) {
      by_state[static_cast<int>(p->liveness)]++;
      history::RankRow r;
      r.job = job->job();
      r.key = key;
      r.rank = p->identity.rank();
      r.host = p->identity.host();
      r.pid = p->identity.pid();
      r.local_rank = p->identity.local_rank();
      r.liveness = std::string(LivenessName(p->liveness));
      r.records = p->records;
      r.dropped = p->dropped;
      r.last_record_ns = p->last_record_ns;
      r.last_seen_ns = p->last_seen_ns;
      const uint64_t last = std::max(p->last_record_rx_ns, p->first_seen_ns);
      ages.push_back(RankAge{r.rank >= 0 ? std::to_string(r.rank) : key, p->identity,
                             now > last ? (now - last) * 1e-9 : 0});
      ranks.push_back(std::move(r));
    }
    held[1].until_ns = registry_.Now();
    job->set_tick_held(held);
  }
  PublishRankAges(job->job(), &ages);
  for (Liveness lv : {Liveness::kAlive, Liveness::kSilent, Liveness::kExited}) {
    metrics_.SetJobRanks(job->job(), LivenessName(lv), by_state[static_cast<int>(lv)]);
  }
  lap("rank rows and metrics");
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
  *finished = summary.state == "finished";
  return std::move(sink.out);
}

// The detectors of one job that read the job itself (`with_lock`: the
// caller holds the job's lock), or the others, which read only the window's
// view (ReadsOnlyTheView; the caller does not hold it). One after
// another on this thread; the view's detectors of a job of
// --detector-parallel-min-ranks+ ranks on up to --detector-threads threads
// at once, the longest of the last tick first. Detector i reports into
// (*sinks)[i].
void Engine::RunDetectors(const JobState& job, bool with_lock, std::vector<VectorSink>* sinks,
                          TickCost* cost) {
  auto timed = [this, &job, sinks](size_t i) {
    const auto t = std::chrono::steady_clock::now();
    detectors_[i]->OnWindow(job, (*sinks)[i]);
    detector_seconds_[i] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  detector_seconds_.resize(detectors_.size(), 0.0);
  std::vector<size_t> mine;
  for (size_t i = 0; i < detectors_.size(); ++i) {
    if (detectors_[i]->ReadsOnlyTheView() != with_lock) mine.push_back(i);
  }
  const WindowView* view = views_ && !with_lock ? &views_->Get(job) : nullptr;
  const int threads = options_.detector_threads;
  if (threads > 1 && view != nullptr && mine.size() > 1 &&
      view->ranks.size() >= static_cast<size_t>(options_.detector_parallel_min_ranks)) {
    auto t = std::chrono::steady_clock::now();
    view->FindAll(threads);
    cost->seconds["rank figures"] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    std::stable_sort(mine.begin(), mine.end(), [this](size_t a, size_t b) {
      return detector_seconds_[a] > detector_seconds_[b];
    });
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t k; (k = next.fetch_add(1)) < mine.size();) timed(mine[k]);
    };
    std::vector<std::thread> pool;
    const size_t extra = std::min<size_t>(static_cast<size_t>(threads), mine.size());
    for (size_t k = 1; k < extra; ++k) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
  } else {
    for (size_t i : mine) timed(i);
  }
  for (size_t i : mine) cost->seconds[detectors_[i]->name()] += detector_seconds_[i];
}

// Records that came after their window was analysed (the ingest was
// behind: the tick held the job, or the engine's cores were short) are
// analysed in the window they arrived in: counted, and told in the log.
void Engine::NoteLateRecords(const JobState& job, const WindowSummaryRow& row) {
  if (row.late_records == 0) return;
  metrics_.AddLateRecords(job.job(), row.late_records);
  if (g_late_log.Allow()) {
    Log()->warn(
        "job {}: {} of the window's {} records ({:.1f} %) ended over {:.0f} s before it began: "
        "they reached the engine after their own window was analysed (the ingest was behind) "
        "and are analysed in this one (xpu_ingest_records_late_total)",
        job.job(), row.late_records, row.records,
        100.0 * static_cast<double>(row.late_records) /
            static_cast<double>(std::max<uint64_t>(1, row.records)),
        kLateRecordSlackNs * 1e-9);
  }
}

// A tick that takes more than half a window is told in the log with where
// its time went (the window thread is single; a tick longer than a window
// delays every job's next diagnosis).
void Engine::WarnSlowTick(double seconds, const TickCost& cost) {
  if (seconds <= options_.window_s / 2) return;
  std::vector<std::pair<double, std::string_view>> by_time;
  for (const auto& [what, s] : cost.seconds) by_time.push_back({s, what});
  std::sort(by_time.rbegin(), by_time.rend());
  std::string top;
  for (size_t i = 0; i < by_time.size() && i < 4; ++i) {
    absl::StrAppend(&top, i ? ", " : "", std::string(by_time[i].second),
                    absl::StrFormat(" %.2f s", by_time[i].first));
  }
  Log()->warn("window tick took {:.2f} s of a {:.0f} s window ({} processes): {}", seconds,
              options_.window_s, cost.processes, top);
}

std::vector<Diagnosis> Engine::TickWindow(uint64_t window_end_ns) {
  std::lock_guard<std::mutex> tick(tick_mu_);
  const auto tick_start = std::chrono::steady_clock::now();
  ApplyReplicaChanges();
  registry_.UpdateLiveness();
  const uint64_t now = registry_.Now();
  const uint64_t end = window_end_ns != 0 ? std::min(window_end_ns, now) : now;
  // The view takes the records that started before the window's end (the
  // others wait for the next window); without an end, every record.
  WindowCut cut;
  if (window_end_ns != 0) {
    cut.end_ns = end;
    cut.next_ns = end + static_cast<uint64_t>(options_.window_s * 1e9);
  }
  std::vector<Diagnosis> all;
  std::set<std::string> ticked, finished;
  TickCost cost;
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    bool done = false;
    for (Diagnosis& d : TickJob(*job, now, end, cut, &cost, &done)) {
      all.push_back(std::move(d));
    }
    ticked.insert(job->job());
    if (done) finished.insert(job->job());
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
    aged_ranks_.erase(job);
    metrics_.ForgetJob(job);
    ReleaseJob(job);
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
  TrackerUpdate update = tracker_->Update(&all, ticked, alive, now, finished);
  for (const Diagnosis& d : all) store_->EnqueueDiagnosis(d);
  for (const std::shared_ptr<JobState>& job : registry_.Jobs()) {
    if (ticked.count(job->job())) job->set_analysed_until_ns(end);
  }
  for (const ResolvedDiagnosis& r : update.resolved) {
    store_->EnqueueDiagnosisResolution(history::DiagnosisResolution{
        r.diagnosis.job, r.diagnosis.kind, r.diagnosis.subject, r.resolved_ns});
  }
  diagnosis_metrics_->Apply(update, alive);
  if (notifier_) notifier_->Publish(update, now);
  views_->Retain(alive_list);
  history_->Retain(alive_list);
  recorder_->Retain(alive_list);
  if (ingest_) ingest_->ExpirePending();
  // The window's views and the rings' window records were freed: hand the
  // allocator's free pages back to the system, so that the engine's memory
  // is what it holds, not the high-water mark of every window (glibc keeps
  // freed memory in its arenas otherwise; under jemalloc, the engine's
  // default, glibc's heap is unused and this returns at once: jemalloc's
  // background thread gives freed pages back about a second after they
  // are freed).
  malloc_trim(0);
  metrics_.SetDaemonsConnected(registry_.DaemonsConnected());
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - tick_start).count();
  metrics_.ObserveWindowStep(took);
  WarnSlowTick(took, cost);
  return all;
}

}  // namespace xpu::engine
