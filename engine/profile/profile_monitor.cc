// engine/profile/profile_monitor.cc — see profile_monitor.h.
#include "engine/profile/profile_monitor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "engine/profile/differential_localization.h"

namespace xpu::engine::profile {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("profile");
  return log;
}

constexpr uint64_t kNsPerS = 1000000000ull;

bool EnvDouble(const char* name, double min, double max, double* out) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  double d = strtod(v, &end);
  if (end == v || *end != '\0' || !(d >= min && d <= max)) return false;
  *out = d;
  return true;
}

analysis::FunctionSummary FromWire(const xpu::v1::FunctionPattern& p) {
  analysis::FunctionSummary s;
  s.name = p.name();
  if (!analysis::ParseFunctionClass(p.cls(), &s.cls)) s.cls = analysis::FunctionClass::kGpuCompute;
  // Daemons are other processes: clamp what the math relies on.
  s.beta = std::clamp(p.beta(), 0.0, 1.0);
  s.critical_ns = p.critical_ns();
  s.executions = p.executions();
  s.exec_ns = p.exec_ns();
  s.inv_exec_per_s = p.inv_exec_per_s() >= 0 ? p.inv_exec_per_s() : 0;
  s.min_exec_ns = p.min_exec_ns();
  return s;
}

}  // namespace

ProfileMonitorOptions ProfileMonitorOptionsFromEnv() {
  ProfileMonitorOptions o;
  double v = 0;
  if (EnvDouble("XPU_PROFILE_AUTO", 0, 1, &v)) o.auto_trigger = v != 0;
  if (EnvDouble("XPU_PROFILE_SECONDS", 0.1, XPU_PROFILE_MAX_DURATION_MS / 1000.0, &v)) {
    o.window_ms = static_cast<uint32_t>(v * 1000);
  }
  if (EnvDouble("XPU_PROFILE_MIN_INTERVAL_S", 0, 1e7, &v))
    o.min_interval_ns = static_cast<uint64_t>(v * kNsPerS);
  if (EnvDouble("XPU_PROFILE_REPORT_TTL_S", 0, 1e7, &v))
    o.report_ttl_ns = static_cast<uint64_t>(v * kNsPerS);
  if (EnvDouble("XPU_PROFILE_GRACE_MS", 0, 600000, &v)) o.grace_ms = static_cast<uint64_t>(v);
  if (EnvDouble("XPU_PROFILE_MAX_RECORDS", 0, 1 << 30, &v))
    o.max_records = static_cast<uint32_t>(v);
  if (EnvDouble("XPU_PROFILE_K", 0, 100, &v)) o.localization.k = v;
  if (EnvDouble("XPU_PROFILE_DELTA", 0, 3, &v)) o.localization.delta = v;
  if (EnvDouble("XPU_PROFILE_MIN_BETA", 0, 1, &v)) o.localization.min_beta = v;
  if (EnvDouble("XPU_PROFILE_MIN_CHANGE", 0, 10, &v)) o.localization.min_change = v;
  if (EnvDouble("XPU_PROFILE_MIN_EXCESS_BETA", 0, 1, &v)) o.localization.min_excess_beta = v;
  return o;
}

ProfileMonitor::ProfileMonitor(Registry& registry, CommandSender send,
                               ProfileMonitorOptions options)
    : registry_(registry), send_(std::move(send)), options_(options) {}

ProfileMonitor::~ProfileMonitor() { Stop(); }

void ProfileMonitor::Stop() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    workers.swap(workers_);
  }
  for (Worker& w : workers) {
    if (w.thread.joinable()) w.thread.join();
  }
}

bool ProfileMonitor::OnThroughputRegression(const std::string& job, uint64_t now_ns) {
  if (!options_.auto_trigger) return false;
  std::lock_guard<std::mutex> l(mu_);
  if (stopping_ || running_[job]) return false;
  auto last = last_auto_ns_.find(job);
  if (last != last_auto_ns_.end() && now_ns - last->second < options_.min_interval_ns) return false;
  last_auto_ns_[job] = now_ns;
  running_[job] = true;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished->load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, job, finished] {
    Log()->info("job {}: throughput regression: profiling window of {} ms on every rank", job,
                options_.window_ms);
    ProfileReport r = Collect(job, "throughput_regression", options_.window_ms,
                              options_.window_ms + options_.grace_ms, auth::EngineCaller());
    Store(std::move(r));
    finished->store(true, std::memory_order_release);
  });
  workers_.push_back(Worker{std::move(t), std::move(finished)});
  return true;
}

absl::StatusOr<ProfileReport> ProfileMonitor::RunNow(const std::string& job, uint32_t seconds,
                                                     uint64_t deadline_ms,
                                                     const xpu::v1::CommandCaller& caller) {
  if (registry_.FindJob(job) == nullptr)
    return absl::NotFoundError(absl::StrCat("no live job ", job));
  const uint32_t window_ms = seconds > 0
                                 ? std::min<uint32_t>(seconds * 1000, XPU_PROFILE_MAX_DURATION_MS)
                                 : options_.window_ms;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return absl::UnavailableError("engine shutting down");
    if (running_[job]) {
      return absl::FailedPreconditionError(
          absl::StrCat("a profiling window is already running for job ", job));
    }
    running_[job] = true;
  }
  ProfileReport r = Collect(job, "on_demand", window_ms,
                            deadline_ms > 0 ? deadline_ms : window_ms + options_.grace_ms, caller);
  Store(r);
  return r;
}

void ProfileMonitor::Store(ProfileReport report) {
  Log()->info(
      "job {}: profiling window done: {}/{} ranks profiled, {} abnormal executions, {} diagnoses{}",
      report.job, report.ranks_profiled(), report.ranks.size(), report.findings.size(),
      report.diagnoses.size(),
      report.ranks_profiled() < report.ranks.size() ? "; not profiled: " + report.SkippedReason()
                                                    : "");
  std::lock_guard<std::mutex> l(mu_);
  running_[report.job] = false;
  latest_[report.job] = std::move(report);
}

std::optional<ProfileReport> ProfileMonitor::Latest(const std::string& job) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = latest_.find(job);
  if (it == latest_.end()) return std::nullopt;
  return it->second;
}

std::vector<Diagnosis> ProfileMonitor::ActiveDiagnoses(const std::string& job,
                                                       uint64_t now_ns) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = latest_.find(job);
  if (it == latest_.end() || now_ns > it->second.finished_ns + options_.report_ttl_ns) return {};
  std::vector<Diagnosis> out = it->second.diagnoses;
  for (Diagnosis& d : out) d.last_seen_ns = now_ns;
  return out;
}

ProfileReport ProfileMonitor::Collect(const std::string& job_name, const std::string& trigger,
                                      uint32_t window_ms, uint64_t deadline_ms,
                                      const xpu::v1::CommandCaller& caller) {
  std::vector<KnownRank> known;
  std::set<std::string> daemons;
  if (std::shared_ptr<JobState> job = registry_.FindJob(job_name)) {
    std::lock_guard<std::mutex> l(job->mu());
    for (const auto& [key, p] : job->processes()) {
      if (p->liveness == Liveness::kExited) continue;
      known.push_back(KnownRank{p->identity.rank(), p->identity.host(), p->identity.pid()});
      if (!p->daemon_id.empty()) daemons.insert(p->daemon_id);
    }
  }
  const uint64_t requested = registry_.Now();
  std::map<std::string, CommandFuture> futures;
  for (const std::string& d : daemons) {
    if (!send_) break;
    xpu::v1::Command c;
    c.set_kind("profile");
    c.set_job(job_name);
    c.set_profile_ms(window_ms);
    c.set_profile_max_records(options_.max_records);
    c.set_deadline_ms(deadline_ms);
    *c.mutable_caller() = caller;
    futures.emplace(d, send_(d, std::move(c)));
  }
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms + 3000);
  std::vector<xpu::v1::ProfileReply> replies;
  for (auto& [daemon, f] : futures) {
    if (f.wait_until(until) != std::future_status::ready) {
      Log()->warn("job {}: daemon {} did not answer the profile command in time", job_name, daemon);
      continue;
    }
    absl::StatusOr<xpu::v1::CommandReply> reply = f.get();
    if (!reply.ok() || !reply->ok()) {
      Log()->warn("job {}: profile command to {} failed: {}", job_name, daemon,
                  reply.ok() ? reply->error() : reply.status().ToString());
      continue;
    }
    xpu::v1::ProfileReply p;
    if (!p.ParseFromString(reply->payload())) {
      Log()->warn("job {}: unreadable profile reply from {}", job_name, daemon);
      continue;
    }
    replies.push_back(std::move(p));
  }
  ProfileReport r =
      BuildReport(job_name, trigger, window_ms, known, replies, options_.localization);
  r.requested_ns = requested;
  r.finished_ns = registry_.Now();
  r.daemons_asked = static_cast<uint32_t>(futures.size());
  r.daemons_answered = static_cast<uint32_t>(replies.size());
  for (Diagnosis& d : r.diagnoses) d.first_seen_ns = d.last_seen_ns = r.finished_ns;
  return r;
}

ProfileReport ProfileMonitor::BuildReport(const std::string& job, const std::string& trigger,
                                          uint32_t window_ms, const std::vector<KnownRank>& known,
                                          const std::vector<xpu::v1::ProfileReply>& replies,
                                          const analysis::LocalizationOptions& options) {
  ProfileReport r;
  r.job = job;
  r.trigger = trigger;
  r.window_ms = window_ms;
  std::vector<analysis::WorkerPatterns> workers;
  std::set<std::pair<std::string, int32_t>> answered;  // (host, pid)
  for (const xpu::v1::ProfileReply& reply : replies) {
    for (const xpu::v1::ProcessProfile& p : reply.processes()) {
      ProfileRank pr;
      pr.rank = p.identity().rank();
      pr.host = p.identity().host();
      pr.pid = p.identity().pid();
      pr.status = p.status();
      pr.reason = p.reason();
      pr.window_start_ns = p.window_start_ns();
      pr.window_end_ns = p.window_end_ns();
      pr.t_ns = p.t1_ns() > p.t0_ns() ? p.t1_ns() - p.t0_ns() : 0;
      pr.iterations = p.iterations();
      pr.step_source = p.step_source();
      pr.kernel_records = p.kernel_records();
      pr.kernels_dropped = p.kernels_dropped();
      pr.cupti_finalized = (p.hook_flags() & XPU_PROFILE_FINALIZED) != 0;
      pr.functions = static_cast<size_t>(p.functions_size());
      answered.insert({pr.host, pr.pid});
      if (pr.status == "done" && pr.t_ns > 0) {
        analysis::WorkerPatterns w;
        w.rank = pr.rank;
        w.host = pr.host;
        for (const xpu::v1::FunctionPattern& f : p.functions()) w.functions.push_back(FromWire(f));
        workers.push_back(std::move(w));
      } else if (pr.status == "done") {
        pr.status = "failed";
        pr.reason = "the window recorded nothing";
      }
      r.ranks.push_back(std::move(pr));
    }
  }
  for (const KnownRank& k : known) {
    if (answered.count({k.host, k.pid})) continue;
    ProfileRank pr;
    pr.rank = k.rank;
    pr.host = k.host;
    pr.pid = k.pid;
    pr.status = "no_reply";
    pr.reason = "its daemon did not answer";
    r.ranks.push_back(std::move(pr));
  }
  std::sort(r.ranks.begin(), r.ranks.end(), [](const ProfileRank& a, const ProfileRank& b) {
    return std::tie(a.rank, a.pid) < std::tie(b.rank, b.pid);
  });
  std::sort(workers.begin(), workers.end(),
            [](const analysis::WorkerPatterns& a, const analysis::WorkerPatterns& b) {
              return a.rank < b.rank;
            });

  const analysis::Localization loc = analysis::Localize(workers, options);
  for (const analysis::FunctionAnalysis& f : loc.functions) {
    const bool matters =
        std::any_of(f.patterns.begin(), f.patterns.end(),
                    [&](const analysis::Pattern& p) { return p.beta > options.min_beta; });
    if (!matters) continue;
    FunctionRow row;
    row.name = f.name;
    row.cls = f.cls;
    row.reference_ns = f.reference_ns;
    row.beta_median = f.beta_median;
    row.mu_median = f.mu_median;
    row.M = f.M;
    row.MAD = f.MAD;
    for (const analysis::WorkerPatterns& w : workers) row.ranks.push_back(w.rank);
    row.patterns = f.patterns;
    row.D = f.D;
    row.Delta = f.Delta;
    r.functions.push_back(std::move(row));
  }
  std::sort(r.functions.begin(), r.functions.end(), [](const FunctionRow& a, const FunctionRow& b) {
    return a.beta_median > b.beta_median;
  });
  for (const analysis::AbnormalExecution& a : loc.abnormal) {
    const analysis::FunctionAnalysis& f = loc.functions[a.function];
    ProfileFinding pf;
    pf.function = f.name;
    pf.cls = f.cls;
    pf.rank = workers[a.worker].rank;
    pf.host = workers[a.worker].host;
    pf.pattern = f.patterns[a.worker];
    pf.D = f.D[a.worker];
    pf.Delta = f.Delta[a.worker];
    pf.M = f.M;
    pf.MAD = f.MAD;
    pf.beta_median = f.beta_median;
    pf.mu_median = f.mu_median;
    pf.by_expectation = a.by_expectation;
    pf.by_difference = a.by_difference;
    pf.more_time = a.more_time;
    pf.slower = a.slower;
    r.findings.push_back(std::move(pf));
  }
  r.diagnoses = DiagnoseProfile(r);
  return r;
}

}  // namespace xpu::engine::profile
