// pg_test_server — a real, throwaway PostgreSQL server for tests.
//
// initdb and pg_ctl of the Debian package postgresql-15 (found in
// $XPU_PG_BINDIR, on PATH, or under /usr/lib/postgresql/*/bin) create and
// start a cluster in a fresh temporary directory; the server listens only
// on a unix socket in that directory (no TCP port, so parallel tests never
// collide) with trust authentication for the cluster's own superuser.
// PostgreSQL refuses to run as root: as root the cluster belongs to, and
// the server runs as, the user `postgres` (created by the Debian package)
// or else `nobody`.
//
// One server per test process, started on first use and stopped (and its
// directory removed) at exit; each test takes a new database from it.
//
// Thread-safety: Get() and NewDatabase() are thread-safe.
#ifndef XPU_ENGINE_HISTORY_TESTING_PG_TEST_SERVER_H_
#define XPU_ENGINE_HISTORY_TESTING_PG_TEST_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"

namespace xpu::engine::history::testing {

class PgTestServer {
 public:
  // The process's server. Null when it cannot run: `missing` tells whether
  // the reason is that the server binaries are not installed (tests skip)
  // or that they failed (tests fail); `why` says which and how.
  static PgTestServer* Get(std::string* why, bool* missing);
  ~PgTestServer();

  // A new empty database; its URL (postgresql://...?host=SOCKET_DIR).
  absl::StatusOr<std::string> NewDatabase(const std::string& prefix);
  std::string Url(const std::string& dbname) const;
  const std::string& dir() const { return dir_; }
  // Stops the server abruptly and starts it again (tests of reconnects).
  absl::Status Restart();
  absl::Status Stop();
  absl::Status Start();

 private:
  PgTestServer() = default;
  absl::Status Init(std::string* why, bool* missing);
  // Runs a server binary as the cluster's user; its output goes to `log`.
  absl::Status RunAs(const std::vector<std::string>& argv, const std::string& log);

  std::string bindir_;
  std::string dir_;     // socket directory, owner of data/ and log
  uid_t uid_ = 0;       // user the server runs as (0: ourselves)
  gid_t gid_ = 0;
  bool as_other_user_ = false;
  std::mutex mu_;
  int next_db_ = 0;
};

}  // namespace xpu::engine::history::testing

#endif  // XPU_ENGINE_HISTORY_TESTING_PG_TEST_SERVER_H_
