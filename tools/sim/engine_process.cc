#include "tools/sim/engine_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::sim {
namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

bool Serving(const std::string& target, const std::string& token) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = xpu::v1::Query::NewStub(channel);
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("x-xpu-token", token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  xpu::v1::StatusRequest req;
  xpu::v1::StatusReply reply;
  return stub->Status(&ctx, req, &reply).ok();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint64_t StatusKb(const std::string& status, const char* key) {
  const size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  return strtoull(status.c_str() + at + strlen(key), nullptr, 10);
}

}  // namespace

void RaiseFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& s) {
  std::vector<int> out;
  for (const std::string& part :
       std::vector<std::string>(absl::StrSplit(s, ',', absl::SkipEmpty()))) {
    std::vector<std::string> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &hi))) {
      return absl::InvalidArgumentError(absl::StrCat("--engine-cpus: '", part, "' is not a CPU"));
    }
    if (ends.size() == 1) hi = lo;
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat("--engine-cpus: bad range '", part, "'"));
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  if (out.empty()) return absl::InvalidArgumentError("--engine-cpus: empty CPU list");
  return out;
}

std::string FindEngineBinary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = self.parent_path();
  for (const std::filesystem::path& p :
       {dir / "xpu-engine", dir / ".." / ".." / "engine" / "xpu-engine"}) {
    if (access(p.c_str(), X_OK) == 0) return std::filesystem::weakly_canonical(p, ec).string();
  }
  return "";
}

std::string FindCliBinary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path dir = self.parent_path();
  for (const std::filesystem::path& p : {dir / "xpu", dir / ".." / "xpu_cli" / "xpu"}) {
    if (access(p.c_str(), X_OK) == 0) return std::filesystem::weakly_canonical(p, ec).string();
  }
  return "";
}

TimedRun RunTimed(const std::vector<std::string>& argv) {
  TimedRun r;
  if (argv.empty()) return r;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

absl::StatusOr<std::unique_ptr<EngineProcess>> EngineProcess::Start(
    const EngineProcessOptions& o) {
  if (o.binary.empty() || access(o.binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "no xpu-engine to start (", o.binary.empty() ? "none found next to xpu-sim" : o.binary,
        "); give --engine-binary PATH or --engine HOST:PORT"));
  }
  std::vector<int> cpus;
  if (!o.cpus.empty()) {
    absl::StatusOr<std::vector<int>> c = ParseCpuList(o.cpus);
    if (!c.ok()) return c.status();
    cpus = *c;
  }
  std::unique_ptr<EngineProcess> e(new EngineProcess());
  char tmpl[] = "/tmp/xpu-sim-engine-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot create a work directory");
  e->dir_ = tmpl;
  e->log_file_ = o.log_file.empty() ? e->dir_ + "/engine.log" : o.log_file;
  const int port = FreePort();
  if (port == 0) return absl::UnavailableError("no free loopback port for the engine");
  e->target_ = absl::StrCat("127.0.0.1:", port);
  std::vector<std::string> args = {o.binary,
                                   "--listen",
                                   e->target_,
                                   "--metrics-addr",
                                   "off",
                                   "--db",
                                   e->dir_ + "/engine.db",
                                   "--window-s",
                                   absl::StrCat(o.window_s),
                                   "--silent-after-s",
                                   absl::StrCat(o.silent_after_s),
                                   "--log-level",
                                   "warn"};
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  const int log_fd = open(e->log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot write ", e->log_file_));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = o.env;
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(log_fd, 2);
    dup2(log_fd, 1);
    if (!cpus.empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    for (std::string& kv : env_copy) putenv(kv.data());
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  e->pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!e->Alive()) {
      return absl::InternalError(absl::StrCat("xpu-engine exited at start (status ",
                                              e->exit_status_, "); its log: ", e->log_file_, "\n",
                                              ReadFile(e->log_file_)));
    }
    if (Serving(e->target_, o.token)) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  e->Stop(1, /*keep_dir=*/true);
  return absl::DeadlineExceededError(
      absl::StrCat("xpu-engine did not serve within 60 s; its log: ", e->log_file_));
}

EngineProcess::~EngineProcess() { Stop(5); }

bool EngineProcess::Alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    pid_ = -1;
    return false;
  }
  return r == 0;
}

ProcessUsage EngineProcess::Usage() const {
  ProcessUsage u;
  if (pid_ <= 0) return u;
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid_, "/stat"));
  const size_t close = stat.rfind(')');
  if (close != std::string::npos) {
    // Fields after the command name: state is field 3; utime 14, stime 15.
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    if (f.size() > 13) {
      const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
      u.cpu_s = (strtod(f[11].c_str(), nullptr) + strtod(f[12].c_str(), nullptr)) / tick;
    }
  }
  const std::string status = ReadFile(absl::StrCat("/proc/", pid_, "/status"));
  u.rss_bytes = StatusKb(status, "VmRSS:") * 1024;
  u.peak_rss_bytes = StatusKb(status, "VmHWM:") * 1024;
  u.threads = StatusKb(status, "Threads:");
  return u;
}

std::string EngineProcess::Stop(double grace_s, bool keep_dir) {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
    while (Alive() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &exit_status_, 0);
      pid_ = -1;
    }
  }
  if (!keep_dir && !dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  dir_.clear();  // kept or removed: not touched again
  if (exit_status_ < 0) return "not started";
  if (WIFEXITED(exit_status_)) return absl::StrCat("exit ", WEXITSTATUS(exit_status_));
  if (WIFSIGNALED(exit_status_)) return absl::StrCat("signal ", WTERMSIG(exit_status_));
  return "unknown";
}

}  // namespace xpu::sim
