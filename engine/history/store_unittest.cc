// The store on both backends (testing/backends.h): every case runs on a
// SQLite file and on a database of a real PostgreSQL server.
#include "engine/history/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <set>
#include <thread>

#include "engine/history/leases.h"
#include "engine/history/testing/backends.h"

namespace xpu::engine::history {
namespace {

using testing::AllBackends;
using testing::Backend;
using testing::BackendName;

std::string TempDb(const char* name) {
  std::string p = ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".db";
  std::remove(p.c_str());
  std::remove((p + "-wal").c_str());
  std::remove((p + "-shm").c_str());
  return p;
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  // Runs one statement on `db` outside the store; its first cell.
  int64_t Scalar(const std::string& db, const std::string& sql) {
    auto c = OpenSqlConnection(db);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return -1;
    auto r = (*c)->Query(sql, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && !r->empty() ? r->Int(0, 0) : -1;
  }
  void Exec(const std::string& db, const std::string& sql) {
    auto c = OpenSqlConnection(db);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Exec(sql).ok()) << sql;
  }
};

// A fresh database of the case's backend (skips where PostgreSQL is not
// installed).
#define XPU_DB(var, name) \
  std::string var;        \
  XPU_FRESH_DATABASE(GetParam(), name, &var)

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, AllBackends(), BackendName);

TEST_P(StoreTest, RoundTripSurvivesReopen) {
  XPU_DB(path, "roundtrip");
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

// SQLite only: a full disk (SQLite's page limit standing in for it): writes fail, the
// store says so, keeps at most max_pending_rows for retry and counts the
// rows it had to give up; files are created owner-only.
// A small backlog is waited for, whatever the time bound: what was queued
// before is readable after the call.
TEST_P(StoreTest, FlushForWaitsForASmallBacklog) {
  XPU_DB(path, "flushfor");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  Diagnosis d;
  d.job = "job-f";
  d.kind = "slow_gpu";
  d.subject = "rank:1";
  d.ranks = {1};
  d.first_seen_ns = 10;
  d.last_seen_ns = 20;
  for (int i = 0; i < 50; ++i) {
    RankRow r;
    r.job = "job-f";
    r.key = "rank:" + std::to_string(i);
    r.rank = i;
    (*store)->EnqueueRank(r);
  }
  (*store)->EnqueueDiagnosis(d);
  EXPECT_TRUE((*store)->FlushFor(std::chrono::milliseconds(0), 10000));
  auto ds = (*store)->LoadDiagnoses("job-f");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->size(), 1u);
  EXPECT_EQ((*ds)[0].kind, "slow_gpu");
}

TEST(SqliteStoreTest, FailedWritesAreCountedRetriedAndBounded) {
  const std::string path = TempDb("full");
  StoreOptions o;
  o.max_db_bytes = 512 << 10;  // room for the schema, not for the rows below
  o.max_pending_rows = 500;
  auto store = Store::Open(path, o);
  ASSERT_TRUE(store.ok()) << store.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE((*store)->Status().degraded);
  JobSummary j;
  j.job_name = std::string(400, 'n');
  j.state = "running";
  for (int i = 0; i < 3000; ++i) {
    j.job = "job-" + std::to_string(i);
    (*store)->EnqueueJob(j);
  }
  EXPECT_FALSE((*store)->Flush().ok());
  const StoreStatus s = (*store)->Status();
  EXPECT_TRUE(s.degraded);
  EXPECT_NE(s.error.find("full"), std::string::npos) << s.error;
  EXPECT_GT(s.write_failures, 0u);
  EXPECT_LE(s.rows_pending, 500u);
  EXPECT_GT(s.rows_pending, 0u);
  EXPECT_GT(s.rows_dropped, 0u);
  // Every row is written, waiting or counted as given up (read while the
  // writer thread is between retries: the same status before and after).
  size_t written = 0;
  StoreStatus a, b;
  for (int i = 0; i < 100; ++i) {
    a = (*store)->Status();
    auto jobs = (*store)->LoadJobs();
    ASSERT_TRUE(jobs.ok()) << jobs.status();
    written = jobs->size();
    b = (*store)->Status();
    if (a.rows_pending == b.rows_pending && a.rows_dropped == b.rows_dropped &&
        a.write_failures == b.write_failures)
      break;
    usleep(20000);
  }
  EXPECT_EQ(written + b.rows_pending + b.rows_dropped, 3000u)
      << written << " written, " << b.rows_pending << " pending, " << b.rows_dropped
      << " dropped";
}

TEST_P(StoreTest, RefusesNewerSchema) {
  XPU_DB(path, "newer");
  { ASSERT_TRUE(Store::Open(path).ok()); }
  // Simulate a database written by a future engine.
  Exec(path, "UPDATE schema_version SET version=99;");
  auto s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("newer"), std::string::npos) << s.status();
}

// A database written by an engine of schema version 2 (the shipped steps 1
// and 2, verbatim) with a job and a diagnosis in it.
void WriteVersion2Db(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* sql = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
  job TEXT PRIMARY KEY, job_name TEXT NOT NULL, first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL, ranks INTEGER NOT NULL, records INTEGER NOT NULL,
  state TEXT NOT NULL);
CREATE TABLE ranks (
  job TEXT NOT NULL, key TEXT NOT NULL, rank INTEGER NOT NULL, host TEXT NOT NULL,
  pid INTEGER NOT NULL, local_rank INTEGER NOT NULL, liveness TEXT NOT NULL,
  records INTEGER NOT NULL, dropped INTEGER NOT NULL, last_record_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL, PRIMARY KEY (job, key));
CREATE TABLE daemons (
  daemon_id TEXT PRIMARY KEY, host TEXT NOT NULL, version TEXT NOT NULL,
  first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, batches INTEGER NOT NULL,
  records INTEGER NOT NULL, records_dropped INTEGER NOT NULL);
CREATE TABLE window_summaries (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, window_end_ns INTEGER NOT NULL,
  records INTEGER NOT NULL, kernels INTEGER NOT NULL, gemms INTEGER NOT NULL,
  collectives INTEGER NOT NULL, memcpys INTEGER NOT NULL, syncs INTEGER NOT NULL,
  host_events INTEGER NOT NULL, other INTEGER NOT NULL, PRIMARY KEY (job, window_start_ns));
CREATE TABLE window_gemm (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, signature TEXT NOT NULL,
  count INTEGER NOT NULL, total_ns INTEGER NOT NULL, flops REAL NOT NULL, tflops REAL NOT NULL,
  PRIMARY KEY (job, window_start_ns, signature));
CREATE TABLE window_collective (
  job TEXT NOT NULL, window_start_ns INTEGER NOT NULL, op TEXT NOT NULL,
  count INTEGER NOT NULL, bus_bytes REAL NOT NULL, seconds REAL NOT NULL,
  busbw_bytes_per_second REAL NOT NULL, PRIMARY KEY (job, window_start_ns, op));
CREATE TABLE diagnoses (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, team TEXT NOT NULL,
  severity TEXT NOT NULL, ranks TEXT NOT NULL, hosts TEXT NOT NULL, evidence TEXT NOT NULL,
  first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL,
  PRIMARY KEY (job, kind, subject));
CREATE TABLE diagnosis_resolutions (
  job TEXT NOT NULL, kind TEXT NOT NULL, subject TEXT NOT NULL, resolved_ns INTEGER NOT NULL,
  PRIMARY KEY (job, kind, subject));
INSERT INTO schema_version VALUES (2);
INSERT INTO jobs VALUES ('old-job', 'gpt', 10, 20, 8, 1000, 'finished');
INSERT INTO diagnoses VALUES ('old-job', 'slow_gpu', 'rank:3', 'operations', 'warning', '3', 'h0',
  'slow', 10, 20);
)sql";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_close(db);
}

// SQLite only: PostgreSQL databases start at the current schema.
TEST(SqliteStoreTest, MigratesVersion2DatabaseAndKeepsItsRows) {
  const std::string path = TempDb("v2");
  WriteVersion2Db(path);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto v = (*store)->SchemaVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, Store::kSchemaVersion);
  EXPECT_EQ(Store::kSchemaVersion, 5);
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job, "old-job");
  EXPECT_EQ((*jobs)[0].job_name, "gpt");
  auto diags = (*store)->LoadDiagnoses("old-job");
  ASSERT_TRUE(diags.ok());
  ASSERT_EQ(diags->size(), 1u);
  EXPECT_EQ((*diags)[0].kind, "slow_gpu");
  // The new tables exist and take rows.
  history::RunBaseline run;
  run.job_name = "gpt";
  run.gpu_model = "NVIDIA H200";
  run.job = "new-job";
  run.updated_ns = 30;
  run.windows = 2;
  run.steps = 10;
  run.step_median_s = 0.055;
  run.step_best_s = 0.054;
  (*store)->EnqueueRunBaseline(run, 5);
  ASSERT_TRUE((*store)->Flush().ok());
  auto runs = (*store)->LoadRunBaselines("gpt", "NVIDIA H200", false, "", 0);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_DOUBLE_EQ((*runs)[0].step_median_s, 0.055);
}

TEST_P(StoreTest, RunBaselineUpdateReplacesTheRunAndKeepsTheNewestRuns) {
  XPU_DB(path, "baselines");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto run_of = [](const std::string& job, uint64_t t, double step_s,
                   const std::string& model = "NVIDIA H200") {
    history::RunBaseline r;
    r.job_name = "gpt";
    r.gpu_model = model;
    r.job = job;
    r.updated_ns = t;
    r.windows = 3;
    r.steps = 30;
    r.step_median_s = step_s;
    r.step_best_s = step_s * 0.98;
    r.void_inter = 0.02;
    r.void_minority = 0.05;
    r.gemm["gemm bf16 m=4096 n=4096 k=4096 b=1 NN"] = history::GemmFigure{"bf16", 610.5, 300};
    r.busbw[history::CollectiveShape{"allreduce", 64 << 20, 8, 1}] =
        history::BusBwFigure{180e9, 40};
    r.issue_latency["compute"].Add(150, 7);
    r.issue_latency["compute"].Add(2000, 3);
    return r;
  };
  // The same run stored twice (periodic update): one row set, the newer.
  (*store)->EnqueueRunBaseline(run_of("run-1", 100, 0.050), 3);
  history::RunBaseline updated = run_of("run-1", 110, 0.052);
  updated.gemm.clear();
  updated.gemm["gemm bf16 m=8192 n=4096 k=4096 b=1 NT"] = history::GemmFigure{"bf16", 640, 10};
  (*store)->EnqueueRunBaseline(updated, 3);
  (*store)->EnqueueRunBaseline(run_of("run-2", 200, 0.055), 3);
  (*store)->EnqueueRunBaseline(run_of("h100-run", 250, 0.070, "NVIDIA H100"), 3);
  ASSERT_TRUE((*store)->Flush().ok());
  auto runs = (*store)->LoadRunBaselines("gpt", "NVIDIA H200", false, "run-2", 0);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u) << "run-2 is excluded, the H100 run is another key";
  const history::RunBaseline& r1 = (*runs)[0];
  EXPECT_EQ(r1.job, "run-1");
  EXPECT_EQ(r1.updated_ns, 110u);
  EXPECT_DOUBLE_EQ(r1.step_median_s, 0.052);
  ASSERT_EQ(r1.gemm.size(), 1u) << "the update replaced the run's GEMM rows";
  EXPECT_EQ(r1.gemm.begin()->first, "gemm bf16 m=8192 n=4096 k=4096 b=1 NT");
  EXPECT_DOUBLE_EQ(r1.gemm.begin()->second.tflops, 640);
  ASSERT_EQ(r1.busbw.size(), 1u);
  EXPECT_EQ(r1.busbw.begin()->first.nranks, 8);
  EXPECT_DOUBLE_EQ(r1.busbw.begin()->second.busbw, 180e9);
  ASSERT_EQ(r1.issue_latency.count("compute"), 1u);
  EXPECT_EQ(r1.issue_latency.at("compute").total(), 10u);
  EXPECT_DOUBLE_EQ(r1.void_minority, 0.05);
  auto any = (*store)->LoadRunBaselines("gpt", "", true, "", 0);
  ASSERT_TRUE(any.ok());
  ASSERT_EQ(any->size(), 3u);
  EXPECT_EQ((*any)[0].job, "h100-run") << "newest first";

  // Two more H200 runs with keep = 2: only the newest two of that key stay,
  // with their child rows; the H100 key is untouched.
  (*store)->EnqueueRunBaseline(run_of("run-3", 300, 0.051), 2);
  (*store)->EnqueueRunBaseline(run_of("run-4", 400, 0.053), 2);
  ASSERT_TRUE((*store)->Flush().ok());
  runs = (*store)->LoadRunBaselines("gpt", "NVIDIA H200", false, "", 0);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].job, "run-4");
  EXPECT_EQ((*runs)[1].job, "run-3");
  auto h100 = (*store)->LoadRunBaselines("gpt", "NVIDIA H100", false, "", 0);
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100->size(), 1u);
  EXPECT_EQ(Scalar(path, "SELECT COUNT(*) FROM baseline_gemm WHERE job IN ('run-1','run-2');"), 0)
      << "pruned runs leave no child rows";
}

TEST_P(StoreTest, CalibrationUpsertsPerHost) {
  XPU_DB(path, "calibration");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  history::CalibrationRows rows;
  rows.gemm.push_back(history::GemmCalibrationRow{"NVIDIA H200", "node0", "bf16", 700, 690, 8192,
                                                  8192, 8192, 8, 1});
  rows.collectives.push_back(history::CollectiveCalibrationRow{
      "NVIDIA H200", "node0", history::CollectiveShape{"allreduce", 1 << 20, 8, 1}, 40, 26e9, 45e9,
      1});
  (*store)->EnqueueCalibration(rows);
  rows.gemm[0].tflops = 710;  // re-calibrated
  rows.gemm[0].host = "node1";
  (*store)->EnqueueCalibration(rows);
  rows.gemm[0].host = "node0";
  rows.gemm[0].tflops = 705;
  rows.collectives.clear();
  (*store)->EnqueueCalibration(rows);
  ASSERT_TRUE((*store)->Flush().ok());
  auto got = (*store)->LoadCalibration("NVIDIA H200");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->gemm.size(), 2u);
  EXPECT_EQ(got->gemm[0].host, "node0");
  EXPECT_DOUBLE_EQ(got->gemm[0].tflops, 705);
  EXPECT_DOUBLE_EQ(got->gemm[1].tflops, 710);
  EXPECT_EQ(got->collectives.size(), 1u) << "node0's collective row was uploaded twice: one row";
  auto none = (*store)->LoadCalibration("NVIDIA H100");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->gemm.empty());
  auto all = (*store)->LoadCalibration("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->gemm.size(), 2u);
}

TEST(SqliteStoreTest, OpenFailsCleanlyOnBadPath) {
  auto s = Store::Open("/nonexistent-dir/x/y.db");
  EXPECT_FALSE(s.ok());
}

TEST(PostgresStoreTest, OpenFailsCleanlyOnAServerThatIsNotThere) {
  auto s = Store::Open("postgresql://xpu@/nodb?host=/nonexistent-dir&connect_timeout=2");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cannot connect"), std::string::npos) << s.status();
}

TEST(SqlTest, RedactsPasswords) {
  EXPECT_EQ(RedactDb("postgresql://xpu:s3cret@db:5432/xpu?sslmode=require"),
            "postgresql://xpu:***@db:5432/xpu?sslmode=require");
  EXPECT_EQ(RedactDb("host=db dbname=xpu password=s3cret user=xpu"),
            "host=db dbname=xpu password=*** user=xpu");
  EXPECT_EQ(RedactDb("postgresql://db/xpu?password=s3cret&sslmode=require"),
            "postgresql://db/xpu?password=***&sslmode=require");
  EXPECT_EQ(RedactDb("/var/lib/xpu/engine.db"), "/var/lib/xpu/engine.db");
  EXPECT_TRUE(IsPostgresUrl("postgres://db/xpu"));
  EXPECT_TRUE(IsPostgresUrl("host=/run/pg dbname=xpu"));
  EXPECT_FALSE(IsPostgresUrl("./xpu-engine.db"));
}

TEST(SqlTest, SafeTextKeepsUtf8AndReplacesTheRest) {
  EXPECT_EQ(SafeText("job-\xc3\xa9"), "job-\xc3\xa9");
  EXPECT_EQ(SafeText(std::string("a\0b", 3)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SafeText("x\xff\xfe"), "x\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SafeText("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") << "surrogate";
  EXPECT_EQ(SafeText("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

// A job name a hostile daemon could send (NUL, invalid UTF-8) costs it a
// mangled name, never the transaction the other rows are in.
TEST_P(StoreTest, HostileTextIsStoredSafely) {
  XPU_DB(path, "hostile");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  JobSummary bad;
  bad.job = std::string("evil\0job\xff", 9);
  bad.job_name = "\xc0\xaf";
  bad.state = "running";
  JobSummary good;
  good.job = "good";
  good.state = "running";
  (*store)->EnqueueJob(bad);
  (*store)->EnqueueJob(good);
  ASSERT_TRUE((*store)->Flush().ok());
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  std::set<std::string> names;
  for (const JobSummary& j : *jobs) names.insert(j.job);
  EXPECT_TRUE(names.count("good"));
  EXPECT_TRUE(names.count("evil\xEF\xBF\xBDjob\xEF\xBF\xBD"));
  EXPECT_EQ((*store)->write_stats().rows_dropped, 0u);
}


JobSummary Job(const std::string& job, uint64_t records) {
  JobSummary j;
  j.job = job;
  j.job_name = "gpt";
  j.records = records;
  j.state = "running";
  return j;
}

// Fencing: rows of a job are written only while the replica owns it; the
// others are dropped, counted and reported to the next barrier.
TEST_P(StoreTest, FencingKeepsRowsOfJobsOwnedByAnotherReplicaOut) {
  XPU_DB(path, "fencing");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto a = Leases::Open(path);
  auto b = Leases::Open(path);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Register(ReplicaRow{"A", "a1", "127.0.0.1:1", "v"}, 60000000000ull).ok());
  ASSERT_TRUE((*b)->Register(ReplicaRow{"B", "b1", "127.0.0.1:2", "v"}, 60000000000ull).ok());
  ASSERT_EQ((*a)->Acquire("mine")->owner, "A");
  ASSERT_EQ((*b)->Acquire("theirs")->owner, "B");
  (*store)->SetFencingOwner("A");
  (*store)->EnqueueJob(Job("mine", 1));
  (*store)->EnqueueJob(Job("theirs", 2));
  DaemonState d;
  d.daemon_id = "d1";
  (*store)->EnqueueDaemon(d);  // not a job's row: never fenced
  std::promise<BarrierResult> done;
  (*store)->EnqueueBarrier([&](const BarrierResult& r) { done.set_value(r); });
  BarrierResult r = done.get_future().get();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.fenced_jobs, std::set<std::string>{"theirs"});
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job, "mine");
  EXPECT_EQ(Scalar(path, "SELECT COUNT(*) FROM daemons;"), 1);
  const WriteStats st = (*store)->write_stats();
  EXPECT_EQ(st.rows_fenced, 1u);
  EXPECT_EQ(st.rows_dropped, 0u);
  // A release goes in order after the rows before it.
  (*store)->EnqueueJob(Job("mine", 3));
  (*store)->EnqueueRelease("mine", "A");
  ASSERT_TRUE((*store)->Flush().ok());
  EXPECT_EQ((*(*store)->LoadJob("mine"))->records, 3u);
  EXPECT_FALSE((*b)->Owner("mine")->has_value()) << "released";
}

// A row the database refuses does not take the rest of its transaction
// with it: the others are written one by one, the bad one dropped and
// counted, and the barrier still reports success.
TEST_P(StoreTest, ARefusedRowIsDroppedAndCountedTheOthersAreWritten) {
  XPU_DB(path, "refused");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  Exec(path, "DROP TABLE daemons;");  // every daemon row now fails
  DaemonState d;
  d.daemon_id = "d1";
  (*store)->EnqueueJob(Job("a", 1));
  (*store)->EnqueueDaemon(d);
  (*store)->EnqueueJob(Job("b", 2));
  std::promise<BarrierResult> done;
  (*store)->EnqueueBarrier([&](const BarrierResult& r) { done.set_value(r); });
  EXPECT_TRUE(done.get_future().get().status.ok());
  EXPECT_FALSE((*store)->Flush().ok()) << "Flush reports the failure";
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 2u);
  const WriteStats st = (*store)->write_stats();
  EXPECT_EQ(st.rows_dropped, 1u);
  EXPECT_GE(st.failures, 2u);
  EXPECT_EQ(st.rows_written, 2u);
  EXPECT_NE(st.last_error.find("daemons"), std::string::npos) << st.last_error;
  EXPECT_FALSE(st.degraded);
}

TEST_P(StoreTest, DeliveriesAreRecordedOnce) {
  XPU_DB(path, "deliveries");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->EnqueueAlertDelivery(AlertDelivery{"j", "slow_gpu", "rank:3", 100, "firing", 1});
  (*store)->EnqueueAlertDelivery(AlertDelivery{"j", "slow_gpu", "rank:3", 100, "firing", 2});
  ASSERT_TRUE((*store)->Flush().ok());
  auto deliveries = (*store)->LoadAlertDeliveries("j");
  ASSERT_TRUE(deliveries.ok());
  ASSERT_EQ(deliveries->size(), 1u);
  EXPECT_EQ((*deliveries)[0].delivered_ns, 1u);
}

RankCheckpoint Checkpoint(const std::string& job, const std::string& key, uint64_t records,
                          uint64_t position) {
  RankCheckpoint c;
  c.job = job;
  c.key = key;
  c.rank = 0;
  c.host = "h0";
  c.pid = 42;
  c.start_ticks = 7;
  c.uid = 1000;
  c.records = records;
  c.next_position = position;
  return c;
}

// A checkpoint's callback runs once it is committed; the newest checkpoint
// per rank wins; the window's rank row does not overwrite the checkpointed
// count; a restarted engine reads it back (LoadJobSeed).
TEST_P(StoreTest, CheckpointsAreDurableBeforeTheirCallbackAndSeedARestart) {
  XPU_DB(path, "checkpoints");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    (*store)->EnqueueCheckpoint({Checkpoint("j", "k1", 10, 100)}, "stream-1", nullptr);
    std::promise<int64_t> durable;
    (*store)->EnqueueCheckpoint({Checkpoint("j", "k1", 20, 200)}, "stream-1", [&] {
      // Committed: another connection sees it.
      durable.set_value(Scalar(path, "SELECT records FROM ranks WHERE job='j' AND key='k1';"));
    });
    EXPECT_EQ(durable.get_future().get(), 20);
    RankRow r;
    r.job = "j";
    r.key = "k1";
    r.host = "h0";
    r.pid = 42;
    r.liveness = "alive";
    r.records = 999;  // a window's view: the checkpoint's count stands
    (*store)->EnqueueRank(r);
    ASSERT_TRUE((*store)->Flush().ok());
    EXPECT_EQ((*store)->Status().rows_pending, 0u);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto seed = (*store)->LoadJobSeed("j");
  ASSERT_TRUE(seed.ok()) << seed.status();
  ASSERT_EQ(seed->ranks.size(), 1u);
  const RankSeed& k1 = seed->ranks.at("k1");
  EXPECT_EQ(k1.records, 20u);
  EXPECT_EQ(k1.next_position, 200u);
  EXPECT_EQ(k1.pid, 42);
  EXPECT_EQ(k1.start_ticks, 7u);
  EXPECT_EQ(seed->owner_uid, 1000);
}

// The checkpoint of a job another replica owns is fenced like any row of
// it, and its callback does not run (nothing of it is durable here).
TEST_P(StoreTest, FencedCheckpointsAreNotAcknowledged) {
  XPU_DB(path, "fenced_checkpoints");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto a = Leases::Open(path);
  auto b = Leases::Open(path);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Register(ReplicaRow{"A", "a1", "127.0.0.1:1", "v"}, 60000000000ull).ok());
  ASSERT_TRUE((*b)->Register(ReplicaRow{"B", "b1", "127.0.0.1:2", "v"}, 60000000000ull).ok());
  ASSERT_EQ((*a)->Acquire("mine")->owner, "A");
  ASSERT_EQ((*b)->Acquire("theirs")->owner, "B");
  (*store)->SetFencingOwner("A");
  std::atomic<int> acked_mine{0}, acked_theirs{0};
  (*store)->EnqueueCheckpoint({Checkpoint("mine", "k", 5, 50)}, "s-mine", [&] { ++acked_mine; });
  (*store)->EnqueueCheckpoint({Checkpoint("theirs", "k", 5, 50)}, "s-theirs",
                              [&] { ++acked_theirs; });
  std::promise<BarrierResult> done;
  (*store)->EnqueueBarrier([&](const BarrierResult& r) { done.set_value(r); });
  BarrierResult r = done.get_future().get();
  ASSERT_TRUE((*store)->Flush().ok());
  EXPECT_EQ(acked_mine.load(), 1);
  EXPECT_EQ(acked_theirs.load(), 0);
  EXPECT_EQ(r.fenced_jobs, std::set<std::string>{"theirs"});
  EXPECT_EQ(Scalar(path, "SELECT COUNT(*) FROM ranks WHERE job='theirs';"), 0);
  EXPECT_EQ(Scalar(path, "SELECT records FROM ranks WHERE job='mine';"), 5);
  EXPECT_EQ((*store)->write_stats().rows_fenced, 1u);
}

// PostgreSQL going away: rows wait (counted, degraded) and are written
// once it is back; nothing is lost or written twice.
TEST(PostgresStoreTest, RowsWaitForTheServerAndAreWrittenWhenItIsBack) {
  std::string path;
  XPU_FRESH_DATABASE(Backend::kPostgres, "outage", &path);
  std::string why;
  bool missing = false;
  testing::PgTestServer* pg = testing::PgTestServer::Get(&why, &missing);
  ASSERT_NE(pg, nullptr);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  (*store)->EnqueueJob(Job("before", 1));
  ASSERT_TRUE((*store)->Flush().ok());
  ASSERT_TRUE(pg->Stop().ok());
  (*store)->EnqueueJob(Job("during", 2));
  std::promise<BarrierResult> failed;
  (*store)->EnqueueBarrier([&](const BarrierResult& r) { failed.set_value(r); });
  EXPECT_FALSE(failed.get_future().get().status.ok()) << "a barrier never reports rows not written";
  EXPECT_FALSE((*store)->Flush().ok());
  WriteStats st = (*store)->write_stats();
  EXPECT_TRUE(st.degraded);
  EXPECT_GE(st.rows_pending_retry, 1u);
  EXPECT_GE(st.failures, 1u);
  ASSERT_TRUE(pg->Start().ok());
  (*store)->EnqueueJob(Job("after", 3));
  bool first = true;
  for (int i = 0; i < 100 && first; ++i) {
    std::promise<BarrierResult> p;
    (*store)->EnqueueBarrier([&](const BarrierResult& r) { p.set_value(r); });
    if (p.get_future().get().status.ok()) first = false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(first) << "the store never recovered";
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::vector<std::string> names;
  for (const JobSummary& j : *jobs) names.push_back(j.job);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"after", "before", "during"}));
  st = (*store)->write_stats();
  EXPECT_FALSE(st.degraded);
  EXPECT_EQ(st.rows_pending_retry, 0u);
  EXPECT_EQ(st.rows_dropped, 0u);
}

}  // namespace
}  // namespace xpu::engine::history
