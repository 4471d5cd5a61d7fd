#include "engine/alerting/alert_notifier.h"

#include <chrono>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/json/json.h"
#include "common/logging/logging.h"
#include "engine/alerting/http_client.h"

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

std::string UrlEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string Trimmed(std::string base) {
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

// Field names follow the Alertmanager v2 API (startsAt, endsAt).
json::Json Alert(const Diagnosis& d, uint64_t starts_ns, uint64_t ends_ns, const AlertLinks& l) {
  json::Json annotations = {{"summary", Summary(d)},
                            {"evidence", d.evidence},
                            {"ranks", absl::StrJoin(d.ranks, ",")},
                            {"hosts", absl::StrJoin(d.hosts, ",")},
                            {"command", ReportCommand(d)},
                            {"runbook_url", RunbookUrl(d.kind, l)}};
  if (std::string dash = DashboardUrl(d.job, l); !dash.empty()) annotations["dashboard_url"] = dash;
  return {{"labels",
           {{"alertname", absl::StrCat("xpu_", d.kind)},
            {"team", TeamName(d.team)},
            {"xpu_job", d.job},
            {"severity", SeverityName(d.severity)},
            {"kind", d.kind},
            {"subject", d.subject}}},
          {"annotations", std::move(annotations)},
          {"startsAt", Rfc3339(starts_ns)},
          {"endsAt", Rfc3339(ends_ns)}};
}

json::Json Event(const char* status, const Diagnosis& d, uint64_t resolved_ns,
                 const AlertLinks& l) {
  json::Json e = {{"id", WebhookEventId(d, status)},
          {"status", status},
          {"job", d.job},
          {"kind", d.kind},
          {"subject", d.subject},
          {"team", TeamName(d.team)},
          {"severity", SeverityName(d.severity)},
          {"ranks", d.ranks},
          {"hosts", d.hosts},
          {"evidence", d.evidence},
          {"first_seen_ns", d.first_seen_ns},
          {"last_seen_ns", d.last_seen_ns},
          {"resolved_ns", resolved_ns},
          {"command", ReportCommand(d)},
          {"runbook_url", RunbookUrl(d.kind, l)}};
  if (std::string dash = DashboardUrl(d.job, l); !dash.empty()) e["dashboard_url"] = dash;
  return e;
}

}  // namespace

std::string ReportCommand(const Diagnosis& d) {
  return absl::StrCat(absl::StartsWith(d.kind, "hang_") ? "xpu hang" : "xpu report", " --job ",
                      d.job);
}

std::string RunbookUrl(const std::string& kind, const AlertLinks& l) {
  const std::string base = l.docs_url.empty() ? "docs" : Trimmed(l.docs_url);
  const char* page =
      absl::StartsWith(kind, "hang_") ? "hang-diagnosis.md" : "diagnosis-catalogue.md";
  return absl::StrCat(base, "/", page, "#", kind);
}

std::string DashboardUrl(const std::string& job, const AlertLinks& l) {
  if (l.grafana_url.empty()) return "";
  return absl::StrCat(Trimmed(l.grafana_url), "/d/xpu-job-overview/?var-job=", UrlEscape(job));
}

std::string Rfc3339(uint64_t ns) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ", absl::FromUnixNanos(static_cast<int64_t>(ns)),
                          absl::UTCTimeZone());
}

std::string AlertmanagerPayload(const TrackerUpdate& u, uint64_t now_ns, double ttl_s,
                                const AlertLinks& links) {
  json::Json alerts = json::Json::array();
  const uint64_t ends = now_ns + static_cast<uint64_t>(ttl_s * 1e9);
  for (const Diagnosis& d : u.active) alerts.push_back(Alert(d, d.first_seen_ns, ends, links));
  // Resolved, or ended with the job: the alert stops at that time.
  for (const auto* list : {&u.resolved, &u.ended}) {
    for (const ResolvedDiagnosis& r : *list) {
      alerts.push_back(Alert(r.diagnosis, r.diagnosis.first_seen_ns, r.resolved_ns, links));
    }
  }
  return json::Dump(alerts);
}

std::string WebhookEventId(const Diagnosis& d, std::string_view status) {
  // FNV-1a over the fields that name the event, separated by 0x1f.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
  };
  mix(d.job);
  mix(d.kind);
  mix(d.subject);
  mix(std::to_string(d.first_seen_ns));
  mix(status);
  return absl::StrFormat("%016x", h);
}

std::vector<DeliveredEvent> WebhookEvents(const TrackerUpdate& u) {
  std::vector<DeliveredEvent> out;
  auto add = [&](const Diagnosis& d, const char* status) {
    out.push_back(DeliveredEvent{d.job, d.kind, d.subject, d.first_seen_ns, status});
  };
  for (const Diagnosis& d : u.opened) add(d, "firing");
  for (const ResolvedDiagnosis& r : u.resolved) add(r.diagnosis, "resolved");
  for (const ResolvedDiagnosis& r : u.ended) add(r.diagnosis, "ended_with_job");
  return out;
}

std::string WebhookPayload(const TrackerUpdate& u, const AlertLinks& links) {
  json::Json events = json::Json::array();
  for (const Diagnosis& d : u.opened) events.push_back(Event("firing", d, 0, links));
  for (const ResolvedDiagnosis& r : u.resolved)
    events.push_back(Event("resolved", r.diagnosis, r.resolved_ns, links));
  for (const ResolvedDiagnosis& r : u.ended)
    events.push_back(Event("ended_with_job", r.diagnosis, r.resolved_ns, links));
  return json::Dump(json::Json{{"source", "xpu-engine"}, {"events", std::move(events)}});
}

AlertNotifier::AlertNotifier(AlertNotifierOptions o, prometheus::Registry& registry)
    : o_(std::move(o)),
      posts_(
          prometheus::BuildCounter()
              .Name("xpu_alert_posts_total")
              .Help("Diagnosis notifications posted, by target (alertmanager, webhook) and result")
              .Register(registry)),
      worker_([this] { Loop(); }) {
  // Present from the start for the targets configured.
  for (const char* result : {"ok", "error", "dropped"}) {
    if (!o_.alertmanager_url.empty()) posts_.Add({{"target", "alertmanager"}, {"result", result}});
    if (!o_.webhook_url.empty()) posts_.Add({{"target", "webhook"}, {"result", result}});
  }
}

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
  const bool ends = !u.resolved.empty() || !u.ended.empty();
  if (!o_.alertmanager_url.empty() && (!u.active.empty() || ends)) {
    posts.push_back(Post{"alertmanager", Trimmed(o_.alertmanager_url) + "/api/v2/alerts",
                         AlertmanagerPayload(u, now_ns, o_.alert_ttl_s, o_.links),
                         &o_.alertmanager_auth});
  }
  if (!o_.webhook_url.empty() && (!u.opened.empty() || ends)) {
    posts.push_back(Post{"webhook", o_.webhook_url, WebhookPayload(u, o_.links), &o_.webhook_auth,
                         WebhookEvents(u)});
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
    HttpOptions http;
    http.auth = *p.auth;
    http.ca_file = o_.ca_file;
    http.timeout_ms = o_.timeout_ms;
    absl::StatusOr<HttpResponse> r = HttpRequest("POST", p.url, p.body, http);
    const bool ok = r.ok() && r->status >= 200 && r->status < 300;
    posts_.Add({{"target", p.target}, {"result", ok ? "ok" : "error"}}).Increment();
    (ok ? ok_ : failed_)++;
    if (ok && !p.events.empty() && o_.on_webhook_delivered) o_.on_webhook_delivered(p.events);
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
