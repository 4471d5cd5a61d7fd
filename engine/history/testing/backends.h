// backends — run one test against both store backends:
//
//   class FooTest : public ::testing::TestWithParam<Backend> {
//     void SetUp() override { XPU_FRESH_DATABASE(GetParam(), "foo", &db_); }
//   };
//   INSTANTIATE_TEST_SUITE_P(Backends, FooTest, AllBackends(), BackendName);
//
// SQLite gets a new file in the test's temporary directory; PostgreSQL a
// new database on the process's test server (pg_test_server.h). Where the
// PostgreSQL server binaries are not installed the PostgreSQL instances
// skip, saying so; where they are installed but fail, the test fails.
#ifndef XPU_ENGINE_HISTORY_TESTING_BACKENDS_H_
#define XPU_ENGINE_HISTORY_TESTING_BACKENDS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "engine/history/testing/pg_test_server.h"

namespace xpu::engine::history::testing {

enum class Backend { kSqlite, kPostgres };

inline auto AllBackends() { return ::testing::Values(Backend::kSqlite, Backend::kPostgres); }

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// A fresh database of backend `b`. Sets *skip (with *why) when the backend
// cannot run on this machine; returns "" with *why on a failure.
inline std::string FreshDatabase(Backend b, const std::string& name, bool* skip,
                                 std::string* why) {
  *skip = false;
  if (b == Backend::kSqlite) {
    static std::atomic<int> counter{0};
    std::string p = ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + "_" +
                    std::to_string(counter++) + ".db";
    std::remove(p.c_str());
    std::remove((p + "-wal").c_str());
    std::remove((p + "-shm").c_str());
    return p;
  }
  bool missing = false;
  PgTestServer* pg = PgTestServer::Get(why, &missing);
  if (pg == nullptr) {
    *skip = missing;
    return "";
  }
  absl::StatusOr<std::string> url = pg->NewDatabase(name);
  if (!url.ok()) {
    *why = std::string(url.status().message());
    return "";
  }
  return *url;
}

}  // namespace xpu::engine::history::testing

// In SetUp() or a test body: *out = a fresh database of `backend`, or skip
// (server binaries missing) / fail (anything else).
#define XPU_FRESH_DATABASE(backend, name, out)                                              \
  do {                                                                                      \
    bool xpu_skip_ = false;                                                                 \
    std::string xpu_why_;                                                                   \
    *(out) = ::xpu::engine::history::testing::FreshDatabase((backend), (name), &xpu_skip_,  \
                                                            &xpu_why_);                     \
    if (xpu_skip_) GTEST_SKIP() << xpu_why_;                                                \
    ASSERT_FALSE((out)->empty()) << xpu_why_;                                               \
  } while (0)

#endif  // XPU_ENGINE_HISTORY_TESTING_BACKENDS_H_
