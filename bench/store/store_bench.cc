// store_bench — the history store's writer throughput on SQLite and on a
// real PostgreSQL (a throwaway server, engine/history/testing/
// pg_test_server.h): N rank rows, then N rank checkpoints, each enqueued at
// once and written by the store's writer (Flush / the checkpoint's durable
// callback). Prints rows per second; never asserts speed.
//
//   store_bench [--rows 20000] [--backend sqlite|postgres|both]
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "engine/history/store.h"
#include "engine/history/testing/pg_test_server.h"

namespace {

namespace h = ::xpu::engine::history;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank rows, then checkpoints; seconds of each, or -1 on an error.
bool Measure(const std::string& db, int rows, double* rank_s, double* checkpoint_s) {
  absl::StatusOr<std::unique_ptr<h::Store>> store = h::Store::Open(db);
  if (!store.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", std::string(store.status().message()).c_str());
    return false;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rows; ++i) {
    h::RankRow r;
    r.job = "bench";
    r.key = "host" + std::to_string(i / 8) + ":" + std::to_string(1000 + i);
    r.rank = i;
    r.host = "host" + std::to_string(i / 8);
    r.pid = 1000 + i;
    r.local_rank = i % 8;
    r.liveness = "alive";
    r.records = 190;
    r.last_record_ns = r.last_seen_ns = 1700000000000000000ull + i;
    (*store)->EnqueueRank(r);
  }
  if (absl::Status st = (*store)->Flush(); !st.ok()) {
    std::fprintf(stderr, "store_bench: %s\n", std::string(st.message()).c_str());
    return false;
  }
  *rank_s = Since(t0);
  std::vector<h::RankCheckpoint> cps;
  for (int i = 0; i < rows; ++i) {
    h::RankCheckpoint c;
    c.job = "bench";
    c.key = "host" + std::to_string(i / 8) + ":" + std::to_string(1000 + i);
    c.rank = i;
    c.host = "host" + std::to_string(i / 8);
    c.pid = 1000 + i;
    c.records = 380;
    c.next_position = 380;
    cps.push_back(std::move(c));
  }
  std::mutex mu;
  std::condition_variable cv;
  bool durable = false;
  t0 = std::chrono::steady_clock::now();
  (*store)->EnqueueCheckpoint(std::move(cps), "bench", [&] {
    std::lock_guard<std::mutex> l(mu);
    durable = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> l(mu);
  if (!cv.wait_for(l, std::chrono::minutes(5), [&] { return durable; })) {
    std::fprintf(stderr, "store_bench: checkpoints not durable after 5 minutes\n");
    return false;
  }
  *checkpoint_s = Since(t0);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 20000;
  std::string backend = "both";
  CLI::App app("store_bench: the history store's writer throughput on SQLite and PostgreSQL. "
               "Prints figures; never asserts speed.");
  xpu::flags::Configure(app, "store_bench");
  app.add_option("--rows", rows, "rows of each kind")->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--backend", backend, "sqlite, postgres or both")
      ->check(CLI::IsMember({"sqlite", "postgres", "both"}));
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 64); rc >= 0) return rc;
  int failures = 0;
  if (backend != "postgres") {
    char dir[] = "/tmp/xpu_store_bench_XXXXXX";
    if (mkdtemp(dir) == nullptr) return 1;
    double a = 0, b = 0;
    if (Measure(std::string(dir) + "/bench.db", rows, &a, &b)) {
      std::printf("sqlite      %d rank rows %.0f rows/s, %d checkpoints %.0f rows/s\n", rows,
                  rows / a, rows, rows / b);
    } else {
      failures++;
    }
    std::system(("rm -rf '" + std::string(dir) + "'").c_str());
  }
  if (backend != "sqlite") {
    std::string why;
    bool missing = false;
    h::testing::PgTestServer* pg = h::testing::PgTestServer::Get(&why, &missing);
    absl::StatusOr<std::string> url =
        pg ? pg->NewDatabase("bench") : absl::StatusOr<std::string>(absl::UnavailableError(why));
    double a = 0, b = 0;
    if (!url.ok()) {
      std::printf("postgresql  not measured: %s\n", std::string(url.status().message()).c_str());
      if (!missing) failures++;
    } else if (Measure(*url, rows, &a, &b)) {
      std::printf("postgresql  %d rank rows %.0f rows/s, %d checkpoints %.0f rows/s "
                  "(unix socket, throwaway server)\n",
                  rows, rows / a, rows, rows / b);
    } else {
      failures++;
    }
  }
  return failures == 0 ? 0 : 1;
}
