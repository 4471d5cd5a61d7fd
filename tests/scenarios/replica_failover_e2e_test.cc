// End to end: two engine replicas (real xpu-engine processes) on one real
// PostgreSQL database (postgresql-15, a throwaway cluster in a temporary
// directory), a daemon (the real EngineClient, configured with both
// replicas' addresses) streaming a synthetic 8-rank job with one slow GPU.
// The replica serving the job is killed with SIGKILL mid-job; the other must
// serve the job within 2 windows of the kill, and the job's slow_gpu
// diagnosis must reach the webhook exactly once (one event id, whichever
// replica sent it) and resolve exactly once when the fault ends.
//
// Skips only where the PostgreSQL server binaries are not installed.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/engine_client.h"
#include "engine/history/testing/pg_test_server.h"
#include "engine/testing/fake_daemon.h"
#include "nlohmann/json.hpp"
#include "tests/scenarios/external_process.h"
#include "tests/scenarios/synthetic_job.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::scenarios {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kWindowS = 2;

uint64_t WallNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// The daemon's state provider: identity and every signature of each process
// the synthetic job announced (what a collector keeps for a resync).
class SyntheticState : public daemon::StateProvider, public daemon::CommandHandler {
 public:
  void Note(const xpu::v1::Batch& b) {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& pb : b.processes()) {
      xpu::v1::ProcessBatch& s = state_[pb.process_key()];
      s.set_process_key(pb.process_key());
      *s.mutable_identity() = pb.identity();
      for (const auto& sig : pb.signatures()) *s.add_signatures() = sig;
    }
  }
  std::vector<xpu::v1::ProcessBatch> FullState() override {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<xpu::v1::ProcessBatch> out;
    for (const auto& [k, s] : state_) out.push_back(s);
    return out;
  }
  void HandleCommand(const xpu::v1::Command& c, xpu::v1::CommandReply* r) override {
    r->set_command_id(c.command_id());
    r->set_ok(false);
    r->set_error("not supported by this test daemon");
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, xpu::v1::ProcessBatch> state_;
};

struct Replica {
  std::string id;
  int port = 0;
  int metrics_port = 0;
  ExternalProcess proc;
  std::string log;
  std::string addr() const { return "127.0.0.1:" + std::to_string(port); }
};

bool StartReplica(Replica* r, const std::string& dir, const std::string& db,
                  const std::string& webhook) {
  r->port = FreeLoopbackPort();
  r->metrics_port = FreeLoopbackPort();
  r->log = dir + "/" + r->id + ".log";
  std::vector<std::string> argv = {XPU_ENGINE_PATH,
                                   "--listen=" + r->addr(),
                                   "--metrics-addr=127.0.0.1:" + std::to_string(r->metrics_port),
                                   "--db=" + db,
                                   "--replica-id=" + r->id,
                                   "--window-s=" + std::to_string(kWindowS),
                                   "--webhook-url=" + webhook};
  if (!r->proc.Start(argv, r->log)) return false;
  return r->proc.WaitReady("http://127.0.0.1:" + std::to_string(r->metrics_port) + "/healthz");
}

// The job as the replica at `addr` reports it: (served here, records).
struct JobView {
  bool listed = false;
  std::string replica;  // "" = the one answering
  uint64_t records = 0;
};
JobView ViewJob(const std::string& addr, const std::string& job) {
  auto stub = xpu::v1::Query::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  xpu::v1::StatusRequest req;
  xpu::v1::StatusReply reply;
  JobView v;
  if (!stub->Status(&ctx, req, &reply).ok()) return v;
  for (const auto& j : reply.jobs()) {
    if (j.job() != job) continue;
    v.listed = true;
    v.replica = j.replica();
    v.records = j.records();
  }
  return v;
}

// replica id -> (alive, jobs), as the replica at `addr` lists them.
std::map<std::string, std::pair<bool, uint32_t>> ListReplicas(const std::string& addr) {
  auto stub = xpu::v1::Query::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  xpu::v1::StatusRequest req;
  xpu::v1::StatusReply reply;
  std::map<std::string, std::pair<bool, uint32_t>> out;
  if (!stub->Status(&ctx, req, &reply).ok()) return out;
  for (const auto& r : reply.replicas()) out[r.replica_id()] = {r.alive(), r.jobs()};
  return out;
}

// Webhook events of `kind` for `job`: status -> event id -> posts.
std::map<std::string, std::map<std::string, int>> Events(const std::vector<std::string>& bodies,
                                                         const std::string& job,
                                                         const std::string& kind) {
  std::map<std::string, std::map<std::string, int>> out;
  auto one = [&](const nlohmann::json& e) {
    if (!e.is_object() || e.value("job", "") != job || e.value("kind", "") != kind) return;
    out[e.value("status", "")][e.value("id", "")]++;
  };
  for (const std::string& b : bodies) {
    nlohmann::json j = nlohmann::json::parse(b, nullptr, false);
    if (j.is_array()) {
      for (const auto& e : j) one(e);
    } else if (j.is_object() && j.contains("events")) {
      for (const auto& e : j["events"]) one(e);
    } else {
      one(j);
    }
  }
  return out;
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Param: kill the first replica before the diagnosis could be made (just
// after it took the job), or once it has closed a window of the job.
class ReplicaFailoverE2eTest : public ::testing::TestWithParam<bool> {};

TEST_P(ReplicaFailoverE2eTest, KilledReplicasJobMovesAndItsDiagnosisArrivesOnce) {
  const bool after_a_window = GetParam();
  std::string why;
  bool missing = false;
  engine::history::testing::PgTestServer* pg =
      engine::history::testing::PgTestServer::Get(&why, &missing);
  if (pg == nullptr && missing) GTEST_SKIP() << why;
  ASSERT_NE(pg, nullptr) << why;
  absl::StatusOr<std::string> db = pg->NewDatabase("failover");
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string dir = MakeTempDir("xpu_failover_");
  ASSERT_FALSE(dir.empty());

  HttpSink webhook;
  const std::string hook = "http://127.0.0.1:" + std::to_string(webhook.port()) + "/xpu";
  Replica a, b;
  a.id = "replica-a";
  b.id = "replica-b";
  // One after the other: the first one creates the schema.
  ASSERT_TRUE(StartReplica(&a, dir, *db, hook)) << "see " << a.log;
  ASSERT_TRUE(StartReplica(&b, dir, *db, hook)) << "see " << b.log;

  SyntheticState state;
  daemon::EngineClientOptions o;
  // Both replicas: gRPC picks the first one that answers (a), and b once a
  // is gone.
  o.target = "ipv4:" + a.addr() + "," + b.addr();
  o.daemon_id = "failover-daemon";
  o.host = "failover-host";
  o.version = "test";
  auto client = daemon::EngineClient::Create(o, &state, &state);
  ASSERT_TRUE(client.ok()) << client.status();
  (*client)->Start();

  SyntheticJobSpec spec;
  spec.job = "failover-job";
  spec.ranks = 8;
  spec.fault.slow_gpu_ranks = {3};
  spec.fault.until_step = 60;  // 12 feeds of 5 steps, then healthy
  SyntheticJob job(spec, WallNs());
  int feeds = 0;
  auto feed = [&] {
    xpu::v1::Batch batch = job.NextWindow(5);
    // A daemon's id of each process (its ring): one per rank here.
    for (auto& pb : *batch.mutable_processes()) pb.set_process_key(pb.identity().rank() + 1);
    state.Note(batch);
    (*client)->Enqueue(std::move(batch));
    ++feeds;
  };
  // Feeds every half window, checking `pred` every 100 ms, until it holds
  // or `timeout_s` passes.
  auto next_feed = Clock::now();
  auto feed_until = [&](auto pred, double timeout_s) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
      if (pred()) return true;
      if (Clock::now() >= next_feed) {
        feed();
        next_feed = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(kWindowS / 2));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pred();
  };

  // a serves the job and has committed a window of it.
  ASSERT_TRUE(feed_until(
      [&] {
        JobView v = ViewJob(a.addr(), spec.job);
        return v.listed && v.replica.empty() && v.records > 0;
      },
      60))
      << "replica a never served the job; see " << a.log;
  if (after_a_window) {
    feed();
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindowS * 1.2));
  }
  const uint64_t a_records = ViewJob(a.addr(), spec.job).records;
  const size_t fired_before_kill = Events(webhook.Bodies(), spec.job, "slow_gpu")["firing"].size();

  const auto t_kill = Clock::now();
  a.proc.Kill();
  std::printf("replica a killed (SIGKILL) %s, after %d feeds; it held %llu records; "
              "firing events before the kill: %zu\n",
              after_a_window ? "after a window" : "at once", feeds,
              static_cast<unsigned long long>(a_records), fired_before_kill);

  // b serves the job, with what a committed carried on.
  double moved_s = -1;
  ASSERT_TRUE(feed_until(
      [&] {
        JobView v = ViewJob(b.addr(), spec.job);
        if (v.listed && v.replica.empty() && moved_s < 0) moved_s = Since(t_kill);
        return moved_s >= 0;
      },
      60))
      << "replica b never took the job over; see " << b.log;
  double fired_s = -1;
  ASSERT_TRUE(feed_until(
      [&] {
        if (!Events(webhook.Bodies(), spec.job, "slow_gpu")["firing"].empty()) {
          if (fired_s < 0) fired_s = fired_before_kill > 0 ? 0 : Since(t_kill);
          return true;
        }
        return false;
      },
      60))
      << "no slow_gpu firing event after " << feeds << " feeds (b holds "
      << ViewJob(b.addr(), spec.job).records << " of " << job.records_emitted()
      << " records); see " << a.log << " and " << b.log;
  std::printf("after the kill: b served the job in %.2f s, the diagnosis had arrived %.2f s "
              "after the kill (window %.1f s)\n",
              moved_s, fired_s, kWindowS);
  EXPECT_LE(moved_s, 2 * kWindowS) << "the job moved later than 2 windows after the kill";
  EXPECT_LE(fired_s, 2 * kWindowS) << "the diagnosis arrived later than 2 windows after the kill";
  // b lists both replicas: a's lease expired, b owns the job.
  EXPECT_TRUE(feed_until(
      [&] {
        auto r = ListReplicas(b.addr());
        return r.size() == 2 && !r["replica-a"].first && r["replica-b"].first &&
               r["replica-b"].second == 1;
      },
      30))
      << "b's status does not show a's lease expired and the job at b";
  EXPECT_GE(ViewJob(b.addr(), spec.job).records, a_records)
      << "b lost records a had committed";

  // The fault ends at step 60: the diagnosis resolves, once.
  ASSERT_TRUE(feed_until(
      [&] { return !Events(webhook.Bodies(), spec.job, "slow_gpu")["resolved"].empty(); }, 90))
      << "the diagnosis never resolved; see " << b.log;
  // A few more windows: nothing is announced again.
  for (int i = 0; i < 4; ++i) {
    feed();
    std::this_thread::sleep_for(std::chrono::duration<double>(kWindowS / 2));
  }
  auto events = Events(webhook.Bodies(), spec.job, "slow_gpu");
  int firing_posts = 0, resolved_posts = 0;
  for (const auto& [id, n] : events["firing"]) firing_posts += n;
  for (const auto& [id, n] : events["resolved"]) resolved_posts += n;
  std::printf("webhook: %zu firing event(s) in %d post(s), %zu resolved event(s) in %d post(s)\n",
              events["firing"].size(), firing_posts, events["resolved"].size(), resolved_posts);
  EXPECT_EQ(events["firing"].size(), 1u) << "one episode, one firing event";
  EXPECT_EQ(events["resolved"].size(), 1u) << "one episode, one resolution";
  EXPECT_EQ(firing_posts, 1) << "delivered once";
  EXPECT_EQ(resolved_posts, 1) << "delivered once";

  (*client)->Stop();
  b.proc.Stop();
}

INSTANTIATE_TEST_SUITE_P(KillPoints, ReplicaFailoverE2eTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "AfterAWindow" : "AtOnce";
                         });

}  // namespace
}  // namespace xpu::scenarios
