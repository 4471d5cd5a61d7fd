#include "engine/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>

namespace xpu::engine {
namespace {

std::string TempDb(const char* name) {
  std::string p = ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".db";
  std::remove(p.c_str());
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  return p;
}

TEST(StoreTest, RoundTripSurvivesReopen) {
  const std::string path = TempDb("roundtrip");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    JobSummary j;
    j.job = "job-a";
    j.job_name = "llama";
    j.ranks = 8;
    j.first_seen_ns = 100;
    j.last_seen_ns = 200;
    j.records = 12345;
    j.state = "running";
    (*store)->EnqueueJob(j);
    j.last_seen_ns = 300;
    j.records = 20000;
    j.state = "finished";
    (*store)->EnqueueJob(j);  // upsert
    JobSummary b = j;
    b.job = "job-b";
    b.first_seen_ns = 150;
    (*store)->EnqueueJob(b);
    RankRow r;
    r.job = "job-a";
    r.key = "rank:3";
    r.rank = 3;
    r.host = "h3";
    r.pid = 33;
    r.liveness = "exited";
    r.records = 999;
    (*store)->EnqueueRank(r);
    WindowSummaryRow w;
    w.job = "job-a";
    w.window_start_ns = 1000;
    w.window_end_ns = 2000;
    w.records = 42;
    w.kinds.gemm = 40;
    w.kinds.collective = 2;
    w.gemm.push_back(GemmWindowRow{"gemm 1x1x1", 40, 4000, 8e12});
    CollectiveWindowRow c;
    c.op = "allreduce";
    c.bw.count = 2;
    c.bw.bus_bytes = 1e9;
    c.bw.seconds = 0.01;
    w.collectives.push_back(c);
    (*store)->EnqueueWindow(w);
    Diagnosis d;
    d.job = "job-a";
    d.kind = "rank_silent";
    d.subject = "rank:3";
    d.team = Team::kInfrastructure;
    d.severity = Severity::kCritical;
    d.ranks = {3};
    d.hosts = {"h3"};
    d.evidence = "silent";
    d.first_seen_ns = 10;
    d.last_seen_ns = 20;
    (*store)->EnqueueDiagnosis(d);
    d.first_seen_ns = 15;  // later report of the same finding
    d.last_seen_ns = 40;
    (*store)->EnqueueDiagnosis(d);
    ASSERT_TRUE((*store)->Flush().ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto v = (*store)->SchemaVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, Store::kSchemaVersion);
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].job, "job-a");
  EXPECT_EQ((*jobs)[0].records, 20000u);
  EXPECT_EQ((*jobs)[0].state, "finished");
  EXPECT_EQ((*jobs)[0].first_seen_ns, 100u);
  EXPECT_EQ((*jobs)[0].job_name, "llama");
  EXPECT_EQ((*jobs)[1].job, "job-b");
  auto ranks = (*store)->LoadRanks("job-a");
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 1u);
  EXPECT_EQ((*ranks)[0].host, "h3");
  EXPECT_EQ((*ranks)[0].records, 999u);
  auto windows = (*store)->LoadWindows("job-a");
  ASSERT_TRUE(windows.ok());
  ASSERT_EQ(windows->size(), 1u);
  EXPECT_EQ((*windows)[0].kinds.gemm, 40u);
  ASSERT_EQ((*windows)[0].gemm.size(), 1u);
  EXPECT_NEAR((*windows)[0].gemm[0].Tflops(), 8e12 / 4e-6 / 1e12, 1e-6);
  ASSERT_EQ((*windows)[0].collectives.size(), 1u);
  EXPECT_NEAR((*windows)[0].collectives[0].bw.BusBw(), 1e11, 1);
  auto diags = (*store)->LoadDiagnoses("job-a");
  ASSERT_TRUE(diags.ok());
  ASSERT_EQ(diags->size(), 1u) << "same job+kind+subject is one diagnosis";
  EXPECT_EQ((*diags)[0].first_seen_ns, 10u);
  EXPECT_EQ((*diags)[0].last_seen_ns, 40u);
  EXPECT_EQ((*diags)[0].team, Team::kInfrastructure);
  EXPECT_EQ((*diags)[0].ranks, std::vector<int32_t>{3});
}

TEST(StoreTest, RefusesNewerSchema) {
  const std::string path = TempDb("newer");
  { ASSERT_TRUE(Store::Open(path).ok()); }
  // Simulate a database written by a future engine.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version=99;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("newer"), std::string::npos) << s.status();
}

TEST(StoreTest, OpenFailsCleanlyOnBadPath) {
  auto s = Store::Open("/nonexistent-dir/x/y.db");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace xpu::engine
