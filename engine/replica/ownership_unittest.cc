// Ownership on both backends (history/testing/backends.h): a job is claimed
// by the first replica that sees it (its state loaded first), the others are
// told where it is, and it moves to a live replica once its owner stops
// renewing its lease; a replica that finds its job claimed elsewhere gives
// it up; a second instance of one replica id replaces the first.
#include "engine/replica/ownership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/history/store.h"
#include "engine/history/testing/backends.h"

namespace xpu::engine::replica {
namespace {

using history::testing::AllBackends;
using history::testing::Backend;
using history::testing::BackendName;

class OwnershipTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    XPU_FRESH_DATABASE(GetParam(), "ownership", &db_);
    auto store = history::Store::Open(db_);  // creates the schema
    ASSERT_TRUE(store.ok()) << store.status();
  }
  std::unique_ptr<Ownership> Replica(const std::string& id, const std::string& instance,
                                     double ttl_s) {
    auto l = history::Leases::Open(db_);
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok()) return nullptr;
    OwnershipOptions o;
    o.replica_id = id;
    o.instance = instance;
    o.address = id + ":7441";
    o.version = "test";
    o.lease_ttl_s = ttl_s;
    return std::make_unique<Ownership>(std::move(*l), o);
  }
  std::string db_;
};

INSTANTIATE_TEST_SUITE_P(Backends, OwnershipTest, AllBackends(), BackendName);

TEST_P(OwnershipTest, FirstClaimLoadsTheJobOthersAreToldWhereItIs) {
  auto a = Replica("a", "a1", 600);
  auto b = Replica("b", "b1", 600);
  ASSERT_TRUE(a && b);
  std::vector<std::string> loaded;
  ASSERT_TRUE(a->Start([&](const std::string& j) {
                   loaded.push_back(j);
                   return absl::OkStatus();
                 },
                 nullptr, nullptr)
                  .ok());
  ASSERT_TRUE(b->Start(nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(a->Check("job-1").kind, Verdict::kMine);
  EXPECT_EQ(a->Check("job-1").kind, Verdict::kMine);
  EXPECT_EQ(loaded, std::vector<std::string>{"job-1"}) << "loaded once, when claimed";
  const Verdict v = b->Check("job-1");
  EXPECT_EQ(v.kind, Verdict::kElsewhere);
  EXPECT_EQ(v.owner, "a");
  EXPECT_EQ(v.address, "a:7441");
  EXPECT_TRUE(a->Serves("job-1"));
  EXPECT_FALSE(b->Serves("job-1"));
}

TEST_P(OwnershipTest, AFailedLoadLeavesTheJobUnserved) {
  auto a = Replica("a", "a1", 600);
  ASSERT_TRUE(a);
  int calls = 0;
  ASSERT_TRUE(a->Start([&](const std::string&) {
                   return ++calls == 1 ? absl::UnavailableError("db gone")
                                       : absl::OkStatus();
                 },
                 nullptr, nullptr)
                  .ok());
  const Verdict v = a->Check("job-1");
  EXPECT_EQ(v.kind, Verdict::kUnknown);
  EXPECT_NE(v.error.find("db gone"), std::string::npos) << v.error;
  EXPECT_FALSE(a->Serves("job-1"));
  EXPECT_EQ(a->Check("job-1").kind, Verdict::kMine) << "the next batch tries again";
}

TEST_P(OwnershipTest, JobsOfAStoppedReplicaMoveOnceItsLeaseExpires) {
  auto a = Replica("a", "a1", 1.0);
  auto b = Replica("b", "b1", 1.0);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Start(nullptr, nullptr, nullptr).ok());
  ASSERT_TRUE(b->Start(nullptr, nullptr, nullptr).ok());
  ASSERT_EQ(a->Check("job-1").kind, Verdict::kMine);
  a->Stop(/*resign=*/false);  // as if killed: the lease runs out
  const auto t0 = std::chrono::steady_clock::now();
  Verdict v;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    v = b->Check("job-1");
    if (v.kind == Verdict::kMine) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(v.kind, Verdict::kMine) << "b never took the job over";
}

TEST_P(OwnershipTest, AResignedReplicasJobsMoveAtOnce) {
  auto a = Replica("a", "a1", 600);
  auto b = Replica("b", "b1", 600);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Start(nullptr, nullptr, nullptr).ok());
  ASSERT_TRUE(b->Start(nullptr, nullptr, nullptr).ok());
  ASSERT_EQ(a->Check("job-1").kind, Verdict::kMine);
  a->Stop(/*resign=*/true);
  // b's cache of the foreign owner is short-lived.
  std::this_thread::sleep_for(std::chrono::nanoseconds(Ownership::kForeignCacheNs));
  EXPECT_EQ(b->Check("job-1").kind, Verdict::kMine);
}

TEST_P(OwnershipTest, AReplicaWhoseJobWasClaimedElsewhereGivesItUp) {
  auto a = Replica("a", "a1", 1.0);
  auto b = Replica("b", "b1", 1.0);
  ASSERT_TRUE(a && b);
  std::atomic<int> lost{0};
  ASSERT_TRUE(a->Start(nullptr, [&](const std::vector<std::string>& jobs) { lost += jobs.size(); },
                       nullptr)
                  .ok());
  ASSERT_TRUE(a->Check("job-1").kind == Verdict::kMine);
  // b claims the job while a's lease has lapsed: a's replica row is made to
  // expire by a registration of the same instance with a lease of zero (a's
  // next heartbeat renews it, so try until b got in first).
  auto stale = history::Leases::Open(db_);
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE(b->Start(nullptr, nullptr, nullptr).ok());
  bool claimed = false;
  for (int i = 0; i < 50 && !claimed; ++i) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(Ownership::kForeignCacheNs));
    ASSERT_TRUE((*stale)->Register(history::ReplicaRow{"a", "a1", "a:7441", "test"}, 0).ok());
    claimed = b->Check("job-1").kind == Verdict::kMine;
  }
  ASSERT_TRUE(claimed);
  const auto t0 = std::chrono::steady_clock::now();
  while (lost == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(lost.load(), 1) << "a's heartbeat must find the job gone";
  EXPECT_FALSE(a->Serves("job-1"));
  EXPECT_EQ(a->Check("job-1").kind, Verdict::kElsewhere);
}

TEST_P(OwnershipTest, ASecondInstanceOfOneReplicaIdReplacesTheFirst) {
  auto a1 = Replica("a", "a1", 1.0);
  ASSERT_TRUE(a1);
  std::atomic<bool> replaced{false};
  ASSERT_TRUE(a1->Start(nullptr, nullptr, [&](const absl::Status&) { replaced = true; }).ok());
  ASSERT_EQ(a1->Check("job-1").kind, Verdict::kMine);
  auto a2 = Replica("a", "a2", 1.0);
  ASSERT_TRUE(a2);
  ASSERT_TRUE(a2->Start(nullptr, nullptr, nullptr).ok());
  EXPECT_EQ(a2->Check("job-1").kind, Verdict::kMine) << "a restarted replica owns its jobs";
  const auto t0 = std::chrono::steady_clock::now();
  while (!replaced && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(replaced.load());
}

}  // namespace
}  // namespace xpu::engine::replica
