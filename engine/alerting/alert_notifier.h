// alert_notifier — sends diagnoses out of the engine:
//  * Prometheus Alertmanager (v2 API, POST /api/v2/alerts): every window,
//    every active diagnosis as an alert (labels alertname=xpu_<kind>, team,
//    xpu_job, severity, kind, subject; annotations summary/evidence/ranks/
//    hosts and the links back: command (`xpu report --job J`, `xpu hang` for
//    hangs), runbook_url (the kind's section in the docs), dashboard_url
//    (Grafana's job overview, when --grafana-url is set); startsAt = first
//    seen, endsAt = now + ttl so that alerts lapse if the engine stops), and
//    each resolved one (or one that ended with its job) once with endsAt =
//    that time, which Alertmanager treats as resolved.
//  * a generic JSON webhook: one POST per window with changes,
//    {"source":"xpu-engine","events":[{"status":"firing"|"resolved", ...}]}.
//    Each event has an "id", the same for every delivery of one event (an
//    episode's firing, resolution or end: job, kind, subject, first_seen_ns,
//    status), so that a receiver can drop a repeat. With engine replicas a
//    repeat happens only when a replica stops between delivering an event
//    and recording the delivery (on_webhook_delivered): at least once.
//
// Delivery runs on the notifier's own thread so the window thread never
// blocks on the network; the queue is bounded (oldest payload dropped and
// counted). Failures are counted (xpu_alert_posts_total{target,result}) and
// logged, rate-limited.
// Thread-safety: Publish() from one thread (the window thread); counters
// from any.
#ifndef XPU_ENGINE_ALERTING_ALERT_NOTIFIER_H_
#define XPU_ENGINE_ALERTING_ALERT_NOTIFIER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/alerting/diagnosis_tracker.h"
#include "engine/alerting/http_client.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace xpu::engine {

// Where alerts link back to.
struct AlertLinks {
  std::string grafana_url;  // "" = no dashboard link
  std::string docs_url;     // base of docs/; "" = the relative path "docs"
};

// A webhook event that reached its receiver (HTTP 2xx).
struct DeliveredEvent {
  std::string job;
  std::string kind;
  std::string subject;
  uint64_t first_seen_ns = 0;
  std::string status;  // "firing", "resolved", "ended_with_job"
};

struct AlertNotifierOptions {
  std::string alertmanager_url;  // base, e.g. http://127.0.0.1:9093 ("" = off)
  std::string webhook_url;       // full URL ("" = off)
  HttpAuth alertmanager_auth;    // credentials per receiver (http_client.h)
  HttpAuth webhook_auth;
  std::string ca_file;       // verifies https:// receivers; "" = system roots
  double alert_ttl_s = 300;  // endsAt of active alerts = now + ttl
  int timeout_ms = 5000;
  size_t max_queue = 64;
  AlertLinks links;
  // Called on the notifier's thread after each webhook POST that succeeded,
  // with its events (the engine records them for its replicas).
  std::function<void(const std::vector<DeliveredEvent>&)> on_webhook_delivered;
};

// Payload builders, exposed for tests.
// ns since the Unix epoch as RFC 3339 UTC with milliseconds (Alertmanager's
// startsAt/endsAt), e.g. "2026-11-22T02:46:48.123Z".
std::string Rfc3339(uint64_t ns);
std::string AlertmanagerPayload(const TrackerUpdate& u, uint64_t now_ns, double ttl_s,
                                const AlertLinks& links = {});
std::string WebhookPayload(const TrackerUpdate& u, const AlertLinks& links = {});
// The events of WebhookPayload(u), in its order.
std::vector<DeliveredEvent> WebhookEvents(const TrackerUpdate& u);
// The webhook event id of `d`'s firing, resolution or end (16 hex digits).
std::string WebhookEventId(const Diagnosis& d, std::string_view status);
// The links of a diagnosis.
std::string ReportCommand(const Diagnosis& d);
std::string RunbookUrl(const std::string& kind, const AlertLinks& l);
std::string DashboardUrl(const std::string& job, const AlertLinks& l);

class AlertNotifier {
 public:
  AlertNotifier(AlertNotifierOptions o, prometheus::Registry& registry);
  ~AlertNotifier();  // delivers what is queued (bounded by the timeout), then stops

  void Publish(const TrackerUpdate& u, uint64_t now_ns);
  // Blocks until the queue is empty and nothing is in flight (tests).
  void Drain();
  uint64_t posted_ok() const { return ok_; }
  uint64_t posted_failed() const { return failed_; }

 private:
  struct Post {
    std::string target;  // "alertmanager" / "webhook"
    std::string url;
    std::string body;
    const HttpAuth* auth;  // points into o_
    std::vector<DeliveredEvent> events;  // webhook: what it delivers
  };
  void Loop();

  AlertNotifierOptions o_;
  prometheus::Family<prometheus::Counter>& posts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<Post> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::atomic<uint64_t> ok_{0}, failed_{0};
  std::thread worker_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_ALERTING_ALERT_NOTIFIER_H_
