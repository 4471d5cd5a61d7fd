#include "engine/alerting/diagnosis_tracker.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "common/json/json.h"
#include "engine/alerting/alert_notifier.h"
#include "engine/alerting/http_client.h"

namespace xpu::engine {
namespace {

Diagnosis D(const std::string& job, const std::string& kind, const std::string& subject,
            uint64_t t) {
  Diagnosis d;
  d.job = job;
  d.kind = kind;
  d.subject = subject;
  d.team = Team::kOperations;
  d.severity = Severity::kCritical;
  d.ranks = {3};
  d.hosts = {"node0"};
  d.evidence = "rank 3 \"slow\"";
  d.first_seen_ns = d.last_seen_ns = t;
  return d;
}

TEST(DiagnosisTrackerTest, PersistingKeepsFirstSeenAndAbsentResolves) {
  DiagnosisTracker t(1);
  std::vector<Diagnosis> w1 = {D("j", "slow_gpu", "rank:3", 100)};
  TrackerUpdate u = t.Update(&w1, {"j"}, {"j"}, 100);
  EXPECT_EQ(u.opened.size(), 1u);
  EXPECT_EQ(u.active.size(), 1u);
  std::vector<Diagnosis> w2 = {D("j", "slow_gpu", "rank:3", 200)};
  u = t.Update(&w2, {"j"}, {"j"}, 200);
  EXPECT_TRUE(u.opened.empty());
  ASSERT_EQ(u.active.size(), 1u);
  EXPECT_EQ(u.active[0].first_seen_ns, 100u);
  EXPECT_EQ(u.active[0].last_seen_ns, 200u);
  EXPECT_EQ(w2[0].first_seen_ns, 100u);  // rewritten for the store
  std::vector<Diagnosis> none;
  u = t.Update(&none, {"j"}, {"j"}, 300);
  ASSERT_EQ(u.resolved.size(), 1u);
  EXPECT_EQ(u.resolved[0].resolved_ns, 300u);
  EXPECT_EQ(t.active_count(), 0u);
}

TEST(DiagnosisTrackerTest, ActiveWhenTheJobFinishedEndsWithItUnresolved) {
  DiagnosisTracker t(1);
  std::vector<Diagnosis> w = {D("j", "slow_gpu", "rank:3", 100), D("k", "slow_gpu", "rank:1", 100)};
  t.Update(&w, {"j", "k"}, {"j", "k"}, 100);
  // Job j's last window still reports it while the job is finished.
  std::vector<Diagnosis> last = {D("j", "slow_gpu", "rank:3", 200)};
  TrackerUpdate u = t.Update(&last, {"j", "k"}, {"j", "k"}, 200, {"j"});
  EXPECT_TRUE(u.ended.empty());
  EXPECT_EQ(u.active.size(), 1u);  // j's; k was not reported and resolves
  ASSERT_EQ(u.resolved.size(), 1u);
  EXPECT_EQ(u.resolved[0].diagnosis.job, "k");
  std::vector<Diagnosis> none;
  u = t.Update(&none, {"j"}, {"j"}, 300, {"j"});
  EXPECT_TRUE(u.resolved.empty());
  ASSERT_EQ(u.ended.size(), 1u);
  EXPECT_EQ(u.ended[0].diagnosis.kind, "slow_gpu");
  EXPECT_EQ(u.ended[0].resolved_ns, 300u);
  EXPECT_TRUE(u.active.empty());
  EXPECT_EQ(t.active_count(), 0u);
}

TEST(DiagnosisTrackerTest, ResolveAfterSeveralWindowsAndRetiredJobs) {
  DiagnosisTracker t(2);
  std::vector<Diagnosis> w = {D("a", "slow_link", "rank:5", 1), D("b", "slow_gpu", "rank:1", 1)};
  t.Update(&w, {"a", "b"}, {"a", "b"}, 1);
  std::vector<Diagnosis> none;
  // a: one missed window of 2 -> still active; b: job gone -> resolved.
  TrackerUpdate u = t.Update(&none, {"a"}, {"a"}, 2);
  ASSERT_EQ(u.resolved.size(), 1u);
  EXPECT_EQ(u.resolved[0].diagnosis.job, "b");
  EXPECT_EQ(u.active.size(), 1u);
  // A window in which job a was not analysed does not count as missed.
  u = t.Update(&none, {}, {"a"}, 3);
  EXPECT_TRUE(u.resolved.empty());
  u = t.Update(&none, {"a"}, {"a"}, 4);
  EXPECT_EQ(u.resolved.size(), 1u);
}

// Engine replicas: a job taken over goes on with the diagnoses the previous
// owner had, announcing only what the webhook had not got.
TEST(DiagnosisTrackerTest, SeededDiagnosesContinueTheirEpisode) {
  DiagnosisTracker t(1);
  const Diagnosis fired = D("j", "slow_gpu", "rank:3", 100);
  const Diagnosis undelivered = D("j", "slow_link", "comm:1", 200);
  t.Seed(fired, /*firing_delivered=*/true);
  t.Seed(undelivered, /*firing_delivered=*/false);
  std::vector<Diagnosis> r = {D("j", "slow_gpu", "rank:3", 900), D("j", "slow_link", "comm:1", 900)};
  TrackerUpdate u = t.Update(&r, {"j"}, {"j"}, 1000);
  ASSERT_EQ(u.opened.size(), 1u) << "only the firing never delivered is announced";
  EXPECT_EQ(u.opened[0].kind, "slow_link");
  EXPECT_EQ(r[0].first_seen_ns, 100u) << "the episode keeps its first_seen";
  EXPECT_EQ(r[1].first_seen_ns, 200u);
  EXPECT_EQ(u.active.size(), 2u);
  r = {D("j", "slow_gpu", "rank:3", 1900), D("j", "slow_link", "comm:1", 1900)};
  EXPECT_TRUE(t.Update(&r, {"j"}, {"j"}, 2000).opened.empty());
}

TEST(DiagnosisTrackerTest, SeededDiagnosesGetGraceWindowsAndForgetIsSilent) {
  DiagnosisTracker t(1);
  t.Seed(D("j", "slow_gpu", "rank:3", 100), true, /*grace_windows=*/2);
  t.SeedResolved(ResolvedDiagnosis{D("j", "gc", "rank:1", 50), 90});
  std::vector<Diagnosis> none;
  TrackerUpdate u = t.Update(&none, {"j"}, {"j"}, 1000);
  ASSERT_EQ(u.resolved.size(), 1u) << "an undelivered resolution is announced";
  EXPECT_EQ(u.resolved[0].diagnosis.kind, "gc");
  EXPECT_EQ(u.active.size(), 1u) << "grace window 1";
  EXPECT_TRUE(t.Update(&none, {"j"}, {"j"}, 2000).resolved.empty()) << "grace window 2";
  EXPECT_EQ(t.Update(&none, {"j"}, {"j"}, 3000).resolved.size(), 1u);

  t.Seed(D("k", "slow_gpu", "rank:0", 100), false);
  t.Forget("k");  // moved to another replica: no resolution, no announcement
  u = t.Update(&none, {}, {}, 4000);
  EXPECT_TRUE(u.opened.empty());
  EXPECT_TRUE(u.resolved.empty());
  EXPECT_EQ(t.active_count(), 0u);
}

TEST(AlertPayloadTest, WebhookEventsCarryAStableId) {
  TrackerUpdate u;
  u.opened.push_back(D("j", "slow_gpu", "rank:3", 100));
  u.resolved.push_back(ResolvedDiagnosis{D("j", "slow_link", "comm:1", 200), 300});
  const std::vector<DeliveredEvent> ev = WebhookEvents(u);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].status, "firing");
  EXPECT_EQ(ev[0].first_seen_ns, 100u);
  EXPECT_EQ(ev[1].status, "resolved");
  const std::string id = WebhookEventId(u.opened[0], "firing");
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id, WebhookEventId(D("j", "slow_gpu", "rank:3", 100), "firing")) << "stable";
  EXPECT_NE(id, WebhookEventId(D("j", "slow_gpu", "rank:3", 101), "firing")) << "per episode";
  EXPECT_NE(id, WebhookEventId(u.opened[0], "resolved"));
  EXPECT_TRUE(absl::StrContains(WebhookPayload(u), absl::StrCat(R"("id":")", id, R"(")")));
}

TEST(AlertPayloadTest, AlertmanagerAndWebhookBodies) {
  TrackerUpdate u;
  u.active.push_back(D("j", "slow_gpu", "rank:3", 1700000000000000000ull));
  u.opened = u.active;
  ResolvedDiagnosis r{D("j", "slow_link", "rank:5", 1700000000000000000ull),
                      1700000060000000000ull};
  u.resolved.push_back(r);
  std::string am = AlertmanagerPayload(u, 1700000100000000000ull, 300);
  EXPECT_TRUE(absl::StrContains(
      am, R"("alertname":"xpu_slow_gpu","team":"operations","xpu_job":"j","severity":"critical")"))
      << am;
  EXPECT_TRUE(absl::StrContains(am, R"("command":"xpu report --job j")")) << am;
  EXPECT_TRUE(absl::StrContains(am, R"("runbook_url":"docs/diagnosis-catalogue.md#slow_gpu")"))
      << am;
  EXPECT_FALSE(absl::StrContains(am, "dashboard_url")) << am;
  const AlertLinks links{"https://grafana.example/", "https://docs.example/xpu/docs"};
  const std::string linked = AlertmanagerPayload(u, 1700000100000000000ull, 300, links);
  EXPECT_TRUE(absl::StrContains(
      linked,
      R"("dashboard_url":"https://grafana.example/d/xpu-job-overview/?var-job=j")"))
      << linked;
  EXPECT_TRUE(absl::StrContains(
      linked, R"("runbook_url":"https://docs.example/xpu/docs/diagnosis-catalogue.md#slow_gpu")"))
      << linked;
  EXPECT_EQ(RunbookUrl("hang_crash", {}), "docs/hang-diagnosis.md#hang_crash");
  Diagnosis hang = D("job/1 x", "hang_crash", "job", 1);
  EXPECT_EQ(ReportCommand(hang), "xpu hang --job job/1 x");
  EXPECT_EQ(DashboardUrl("job/1 x", links),
            "https://grafana.example/d/xpu-job-overview/?var-job=job%2F1%20x");
  EXPECT_TRUE(absl::StrContains(
      am, R"("startsAt":"2023-11-14T22:13:20.000Z","endsAt":"2023-11-14T22:20:00.000Z")"))
      << am;
  // Resolved: endsAt = resolution time.
  EXPECT_TRUE(absl::StrContains(am, R"("alertname":"xpu_slow_link")"));
  EXPECT_TRUE(absl::StrContains(am, R"("endsAt":"2023-11-14T22:14:20.000Z")")) << am;
  EXPECT_TRUE(absl::StrContains(am, R"("evidence":"rank 3 \"slow\"")")) << am;
  std::string wh = WebhookPayload(u);
  EXPECT_TRUE(absl::StrContains(wh, R"("status":"firing","job":"j","kind":"slow_gpu")")) << wh;
  EXPECT_TRUE(absl::StrContains(wh, R"("status":"resolved","job":"j","kind":"slow_link")")) << wh;
  EXPECT_TRUE(absl::StrContains(wh, R"("ranks":[3],"hosts":["node0"])")) << wh;
  // Ended with the job: the alert ends, the webhook says why.
  TrackerUpdate e;
  e.ended.push_back(ResolvedDiagnosis{D("j", "slow_gpu", "rank:3", 1700000000000000000ull),
                                      1700000060000000000ull});
  EXPECT_TRUE(absl::StrContains(AlertmanagerPayload(e, 1700000100000000000ull, 300),
                                R"("endsAt":"2023-11-14T22:14:20.000Z")"));
  EXPECT_TRUE(absl::StrContains(WebhookPayload(e), R"("status":"ended_with_job")"));
}

TEST(HttpUrlTest, Parse) {
  auto u = ParseHttpUrl("http://127.0.0.1:9093/api");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 9093);
  EXPECT_EQ(u->path, "/api");
  u = ParseHttpUrl("http://am");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "/");
  u = ParseHttpUrl("https://am");  // TLS receivers are supported (http_client_unittest)
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 443);
  EXPECT_FALSE(ParseHttpUrl("ftp://am").ok());
  EXPECT_FALSE(ParseHttpUrl("http://am:99999").ok());
  EXPECT_FALSE(HttpRequest("GET", "http://127.0.0.1:1/", "", "", 2000).ok());  // nothing listens
}

TEST(JsonTextTest, QuoteAndTime) {
  EXPECT_EQ(json::Quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(Rfc3339(1500000000123456789ull), "2017-07-14T02:40:00.123Z");
}

}  // namespace
}  // namespace xpu::engine
