#include "engine/history/testing/pg_test_server.h"

#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/history/sql.h"

namespace xpu::engine::history::testing {
namespace {

bool Executable(const std::string& p) { return access(p.c_str(), X_OK) == 0; }

bool HasServer(const std::string& dir) {
  return Executable(dir + "/initdb") && Executable(dir + "/pg_ctl") &&
         Executable(dir + "/postgres");
}

// Where initdb, pg_ctl and postgres are.
std::string FindBindir() {
  if (const char* env = std::getenv("XPU_PG_BINDIR"); env && *env) {
    return HasServer(env) ? env : "";
  }
  if (const char* path = std::getenv("PATH")) {
    for (absl::string_view d : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      const std::string dir(d);
      if (!Executable(dir + "/initdb")) continue;
      // Debian links initdb/pg_ctl from /usr/lib/postgresql/N/bin.
      std::error_code ec;
      const std::filesystem::path real = std::filesystem::canonical(dir + "/initdb", ec);
      if (!ec && HasServer(real.parent_path().string())) return real.parent_path().string();
      if (HasServer(dir)) return dir;
    }
  }
  glob_t g{};
  std::vector<std::string> found;
  if (glob("/usr/lib/postgresql/*/bin", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      if (HasServer(g.gl_pathv[i])) found.push_back(g.gl_pathv[i]);
    }
  }
  globfree(&g);
  // Newest major version.
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return std::atoi(a.c_str() + std::string("/usr/lib/postgresql/").size()) <
           std::atoi(b.c_str() + std::string("/usr/lib/postgresql/").size());
  });
  return found.empty() ? "" : found.back();
}

std::string Tail(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

std::mutex g_mu;
std::unique_ptr<PgTestServer> g_server;
std::string g_why;
bool g_missing = false;
bool g_tried = false;
int g_watchdog_fd = -1;  // write end: closing it (or dying) stops the server
pid_t g_watchdog = -1;

}  // namespace

PgTestServer* PgTestServer::Get(std::string* why, bool* missing) {
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_tried) {
    g_tried = true;
    std::unique_ptr<PgTestServer> s(new PgTestServer());
    if (absl::Status st = s->Init(&g_why, &g_missing); st.ok()) {
      g_server = std::move(s);
    } else if (g_why.empty()) {
      g_why = std::string(st.message());
    }
  }
  *why = g_why;
  *missing = g_missing;
  return g_server.get();
}

absl::Status PgTestServer::RunAs(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (chdir(dir_.c_str()) != 0) _exit(126);
    if (as_other_user_) {
      if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(argv[0], " failed (status ", status, "):\n", Tail(log)));
}

absl::Status PgTestServer::Init(std::string* why, bool* missing) {
  bindir_ = FindBindir();
  if (bindir_.empty()) {
    *missing = true;
    *why =
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install the Debian "
        "package postgresql-15 (make deps) or point XPU_PG_BINDIR at them";
    return absl::NotFoundError(*why);
  }
  char tmpl[] = "/tmp/xpu-pg-XXXXXX";  // short: the socket path must fit in sun_path
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  dir_ = tmpl;
  if (geteuid() == 0) {
    // PostgreSQL refuses root.
    const passwd* pw = getpwnam("postgres");
    if (pw == nullptr) pw = getpwnam("nobody");
    if (pw == nullptr) return absl::InternalError("running as root and no user postgres/nobody");
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    as_other_user_ = true;
    if (chown(dir_.c_str(), uid_, gid_) != 0) return absl::InternalError("chown failed");
  }
  chmod(dir_.c_str(), 0755);
  // The watchdog, a shell reading a pipe only this process writes, stops
  // the server (SIGQUIT: immediate shutdown) and removes the directory as
  // soon as this process ends, however it ends.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const std::string script = absl::StrCat(
      "cat >/dev/null; pid=$(head -n1 '", dir_, "/data/postmaster.pid' 2>/dev/null); ",
      "if [ -n \"$pid\" ]; then kill -QUIT \"$pid\" 2>/dev/null; i=0; ",
      "while kill -0 \"$pid\" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; fi; ",
      "rm -rf '", dir_, "'");
  g_watchdog = fork();
  if (g_watchdog == 0) {
    dup2(fds[0], 0);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    setsid();
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[0]);
  g_watchdog_fd = fds[1];
  const std::string data = dir_ + "/data";
  const std::string log = dir_ + "/setup.log";
  if (absl::Status st = RunAs({bindir_ + "/initdb", "-D", data, "-U", "xpu", "--auth=trust",
                               "-E", "UTF8", "--locale=C", "--no-sync"},
                              log);
      !st.ok()) {
    *why = absl::StrCat("initdb failed: ", st.message());
    return st;
  }
  if (absl::Status st = Start(); !st.ok()) {
    *why = absl::StrCat("PostgreSQL did not start: ", st.message());
    return st;
  }
  return absl::OkStatus();
}

absl::Status PgTestServer::Start() {
  const std::string opts = absl::StrCat(
      "-k ", dir_,
      " -c listen_addresses='' -c fsync=off -c full_page_writes=off "
      "-c shared_buffers=16MB -c max_connections=80");
  return RunAs({bindir_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-w", "-t",
                "120", "-o", opts, "start"},
               dir_ + "/setup.log");
}

absl::Status PgTestServer::Stop() {
  return RunAs({bindir_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"},
               dir_ + "/setup.log");
}

absl::Status PgTestServer::Restart() {
  if (absl::Status st = Stop(); !st.ok()) return st;
  return Start();
}

PgTestServer::~PgTestServer() {
  if (g_watchdog_fd >= 0) {
    close(g_watchdog_fd);
    g_watchdog_fd = -1;
    int st;
    if (g_watchdog > 0) waitpid(g_watchdog, &st, 0);
  }
}

std::string PgTestServer::Url(const std::string& dbname) const {
  return absl::StrCat("postgresql://xpu@/", dbname, "?host=", dir_);
}

absl::StatusOr<std::string> PgTestServer::NewDatabase(const std::string& prefix) {
  std::string name;
  {
    std::lock_guard<std::mutex> l(mu_);
    name = absl::StrCat(prefix, "_", next_db_++);
  }
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  absl::StatusOr<std::unique_ptr<SqlConnection>> admin = OpenPostgres(Url("postgres"));
  if (!admin.ok()) return admin.status();
  if (absl::Status st = (*admin)->Exec(absl::StrCat("CREATE DATABASE ", name, ";")); !st.ok())
    return st;
  return Url(name);
}

}  // namespace xpu::engine::history::testing
