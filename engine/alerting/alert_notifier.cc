#include "engine/alerting/alert_notifier.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging/logging.h"
#include "engine/alerting/http_client.h"
#include "engine/alerting/json_text.h"

namespace xpu::engine {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("alerting");
  return log;
}

std::string Summary(const Diagnosis& d) {
  return absl::StrCat(d.kind, " in job ", d.job, d.ranks.empty() ? "" : " on rank(s) ",
                      absl::StrJoin(d.ranks, ","), " (", std::string(TeamName(d.team)), ")");
}

std::string Alert(const Diagnosis& d, uint64_t starts_ns, uint64_t ends_ns) {
  return absl::StrCat("{\"labels\":{\"alertname\":", JsonQuote(absl::StrCat("xpu_", d.kind)),
                      ",\"team\":", JsonQuote(TeamName(d.team)), ",\"job\":", JsonQuote(d.job),
                      ",\"severity\":", JsonQuote(SeverityName(d.severity)),
                      ",\"kind\":", JsonQuote(d.kind), ",\"subject\":", JsonQuote(d.subject),
                      "},\"annotations\":{\"summary\":", JsonQuote(Summary(d)),
                      ",\"evidence\":", JsonQuote(d.evidence),
                      ",\"ranks\":", JsonQuote(absl::StrJoin(d.ranks, ",")),
                      ",\"hosts\":", JsonQuote(absl::StrJoin(d.hosts, ",")),
                      "},\"startsAt\":", JsonQuote(Rfc3339(starts_ns)),
                      ",\"endsAt\":", JsonQuote(Rfc3339(ends_ns)), "}");
}

std::string Event(const char* status, const Diagnosis& d, uint64_t resolved_ns) {
  return absl::StrCat(
      "{\"status\":", JsonQuote(status), ",\"job\":", JsonQuote(d.job),
      ",\"kind\":", JsonQuote(d.kind), ",\"subject\":", JsonQuote(d.subject),
      ",\"team\":", JsonQuote(TeamName(d.team)),
      ",\"severity\":", JsonQuote(SeverityName(d.severity)), ",\"ranks\":[",
      absl::StrJoin(d.ranks, ","), "],\"hosts\":[",
      absl::StrJoin(d.hosts, ",",
                    [](std::string* out, const std::string& h) { out->append(JsonQuote(h)); }),
      "],\"evidence\":", JsonQuote(d.evidence), ",\"first_seen_ns\":", d.first_seen_ns,
      ",\"last_seen_ns\":", d.last_seen_ns, ",\"resolved_ns\":", resolved_ns, "}");
}

}  // namespace

std::string AlertmanagerPayload(const TrackerUpdate& u, uint64_t now_ns, double ttl_s) {
  std::vector<std::string> alerts;
  const uint64_t ends = now_ns + static_cast<uint64_t>(ttl_s * 1e9);
  for (const Diagnosis& d : u.active) alerts.push_back(Alert(d, d.first_seen_ns, ends));
  for (const ResolvedDiagnosis& r : u.resolved) {
    alerts.push_back(Alert(r.diagnosis, r.diagnosis.first_seen_ns, r.resolved_ns));
  }
  return absl::StrCat("[", absl::StrJoin(alerts, ","), "]");
}

std::string WebhookPayload(const TrackerUpdate& u) {
  std::vector<std::string> events;
  for (const Diagnosis& d : u.opened) events.push_back(Event("firing", d, 0));
  for (const ResolvedDiagnosis& r : u.resolved)
    events.push_back(Event("resolved", r.diagnosis, r.resolved_ns));
  return absl::StrCat("{\"source\":\"xpu-engine\",\"events\":[", absl::StrJoin(events, ","), "]}");
}

AlertNotifier::AlertNotifier(AlertNotifierOptions o, prometheus::Registry& registry)
    : o_(std::move(o)),
      posts_(
          prometheus::BuildCounter()
              .Name("xpu_alert_posts_total")
              .Help("Diagnosis notifications posted, by target (alertmanager, webhook) and result")
              .Register(registry)),
      worker_([this] { Loop(); }) {}

AlertNotifier::~AlertNotifier() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void AlertNotifier::Publish(const TrackerUpdate& u, uint64_t now_ns) {
  std::vector<Post> posts;
  if (!o_.alertmanager_url.empty() && (!u.active.empty() || !u.resolved.empty())) {
    std::string base = o_.alertmanager_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    posts.push_back(Post{"alertmanager", base + "/api/v2/alerts",
                         AlertmanagerPayload(u, now_ns, o_.alert_ttl_s)});
  }
  if (!o_.webhook_url.empty() && (!u.opened.empty() || !u.resolved.empty())) {
    posts.push_back(Post{"webhook", o_.webhook_url, WebhookPayload(u)});
  }
  if (posts.empty()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (Post& p : posts) {
      if (queue_.size() >= o_.max_queue) {
        posts_.Add({{"target", queue_.front().target}, {"result", "dropped"}}).Increment();
        queue_.pop_front();
      }
      queue_.push_back(std::move(p));
    }
  }
  cv_.notify_all();
}

void AlertNotifier::Drain() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return queue_.empty() && !busy_; });
}

void AlertNotifier::Loop() {
  auto last_log = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stop_ and nothing left
    Post p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    l.unlock();
    absl::StatusOr<HttpResponse> r =
        HttpRequest("POST", p.url, p.body, "application/json", o_.timeout_ms);
    const bool ok = r.ok() && r->status >= 200 && r->status < 300;
    posts_.Add({{"target", p.target}, {"result", ok ? "ok" : "error"}}).Increment();
    (ok ? ok_ : failed_)++;
    if (!ok && std::chrono::steady_clock::now() - last_log > std::chrono::seconds(60)) {
      last_log = std::chrono::steady_clock::now();
      Log()->warn("posting diagnoses to {} ({}) failed: {}", p.target, p.url,
                  r.ok() ? absl::StrCat("HTTP ", r->status, ": ", r->body.substr(0, 200))
                         : std::string(r.status().message()));
    }
    l.lock();
    busy_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  busy_ = false;
  idle_cv_.notify_all();
}

}  // namespace xpu::engine
