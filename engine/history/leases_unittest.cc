// Leases on both backends (testing/backends.h): claims, expiry, resignation,
// replacement of an instance, and concurrent claims of one job.
#include "engine/history/leases.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "engine/history/store.h"
#include "engine/history/testing/backends.h"

namespace xpu::engine::history {
namespace {

using testing::AllBackends;
using testing::Backend;
using testing::BackendName;

constexpr uint64_t kLong = 600ull * 1000000000ull;  // a lease that does not expire in a test

class LeasesTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    XPU_FRESH_DATABASE(GetParam(), "leases", &db_);
    auto store = Store::Open(db_);  // creates the schema
    ASSERT_TRUE(store.ok()) << store.status();
  }
  std::unique_ptr<Leases> Replica(const std::string& id, const std::string& instance,
                                  uint64_t ttl_ns = kLong) {
    auto l = Leases::Open(db_);
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok()) return nullptr;
    absl::Status st = (*l)->Register(ReplicaRow{id, instance, id + ":7441", "test"}, ttl_ns);
    EXPECT_TRUE(st.ok()) << st;
    return std::move(*l);
  }
  std::string db_;
};

INSTANTIATE_TEST_SUITE_P(Backends, LeasesTest, AllBackends(), BackendName);

TEST_P(LeasesTest, AJobBelongsToTheFirstClaimantWhileItsLeaseHolds) {
  auto a = Replica("a", "a1");
  auto b = Replica("b", "b1");
  ASSERT_TRUE(a && b);
  auto got = a->Acquire("job-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->owner, "a");
  EXPECT_EQ(got->epoch, 1u);
  EXPECT_TRUE(got->owner_alive);
  got = b->Acquire("job-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->owner, "a") << "a's lease holds: b is told where the job is";
  EXPECT_EQ(got->address, "a:7441");
  got = a->Acquire("job-1");
  EXPECT_EQ(got->epoch, 1u) << "claiming one's own job changes nothing";
  auto owned = a->Heartbeat(kLong);
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ(*owned, std::set<std::string>{"job-1"});
  auto elsewhere = b->OwnedElsewhere();
  ASSERT_TRUE(elsewhere.ok());
  ASSERT_EQ(elsewhere->size(), 1u);
  EXPECT_EQ((*elsewhere)[0].owner, "a");
  auto replicas = b->Replicas();
  ASSERT_TRUE(replicas.ok());
  ASSERT_EQ(replicas->size(), 2u);
  EXPECT_EQ((*replicas)[0].replica_id, "a");
  EXPECT_EQ((*replicas)[0].jobs, 1u);
  EXPECT_TRUE((*replicas)[0].alive);
}

TEST_P(LeasesTest, AnExpiredLeaseLetsAnotherReplicaClaimTheJob) {
  auto a = Replica("a", "a1", 300ull * 1000000);  // 0.3 s
  auto b = Replica("b", "b1");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->Acquire("job-1")->owner, "a");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  auto got = b->Acquire("job-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->owner, "b");
  EXPECT_EQ(got->epoch, 2u);
  // a comes back: its heartbeat no longer lists the job.
  auto owned = a->Heartbeat(kLong);
  ASSERT_TRUE(owned.ok());
  EXPECT_TRUE(owned->empty());
  EXPECT_EQ(a->Acquire("job-1")->owner, "b") << "b's lease holds now";
}

TEST_P(LeasesTest, ResigningHandsTheJobsOverAtOnce) {
  auto a = Replica("a", "a1");
  auto b = Replica("b", "b1");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->Acquire("job-1")->owner, "a");
  ASSERT_TRUE(a->Resign().ok());
  EXPECT_EQ(b->Acquire("job-1")->owner, "b");
}

TEST_P(LeasesTest, ARestartedReplicaOwnsItsJobsTheOldInstanceLearnsItWasReplaced) {
  auto a1 = Replica("a", "a1");
  ASSERT_TRUE(a1);
  ASSERT_EQ(a1->Acquire("job-1")->owner, "a");
  auto a2 = Replica("a", "a2");
  ASSERT_TRUE(a2);
  auto got = a2->Acquire("job-1");
  EXPECT_EQ(got->owner, "a");
  EXPECT_EQ(got->epoch, 1u);
  auto owned = a2->Heartbeat(kLong);
  ASSERT_TRUE(owned.ok());
  EXPECT_EQ(owned->count("job-1"), 1u);
  auto old = a1->Heartbeat(kLong);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition) << old.status();
}

// Eight replicas claim one job at the same moment: exactly one wins, and
// every one of them is told the same owner.
TEST_P(LeasesTest, ConcurrentClaimsHaveOneWinner) {
  constexpr int kReplicas = 8;
  std::vector<std::unique_ptr<Leases>> rs;
  for (int i = 0; i < kReplicas; ++i) {
    rs.push_back(Replica("r" + std::to_string(i), "i"));
    ASSERT_TRUE(rs.back());
  }
  std::atomic<int> ready{0};
  std::vector<std::string> owners(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      ready++;
      while (ready.load() < kReplicas) std::this_thread::yield();
      auto got = rs[i]->Acquire("contended");
      owners[i] = got.ok() ? got->owner : "error: " + std::string(got.status().message());
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> distinct(owners.begin(), owners.end());
  ASSERT_EQ(distinct.size(), 1u) << *distinct.begin();
  EXPECT_EQ(distinct.begin()->rfind("r", 0), 0u);
  EXPECT_EQ(rs[0]->Owner("contended")->value().epoch, 1u);
}

}  // namespace
}  // namespace xpu::engine::history
