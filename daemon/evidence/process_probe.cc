// daemon/evidence/process_probe.cc — see process_probe.h.
#include "daemon/evidence/process_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/base/clock.h"

namespace xpu::daemon {
namespace {

uint64_t MonoMs() { return MonotonicNs() / 1000000; }

bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  out->clear();
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > 65536) break;
  }
  close(fd);
  return true;
}

}  // namespace

bool ParseProcStat(const std::string& stat, char* state, uint64_t* start_ticks) {
  // comm may contain spaces and parentheses: fields resume after the last ')'.
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return false;
  const char* p = stat.c_str() + close_paren + 2;
  *state = *p;
  // starttime is field 22; state is field 3.
  int field = 3;
  while (*p != '\0' && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  if (field != 22) return false;
  char* end = nullptr;
  *start_ticks = strtoull(p, &end, 10);
  return end != p;
}

std::string ProcStateName(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk-sleep";
    case 'T':
      return "stopped";
    case 't':
      return "tracing-stop";
    case 'Z':
      return "zombie";
    case 'X':
    case 'x':
      return "dead";
    case 'I':
      return "idle";
    default:
      return std::string("unknown(") + state + ")";
  }
}

std::string ProcState(int32_t pid, uint64_t start_ticks) {
  if (pid <= 0) return "gone";
  std::string stat;
  if (!ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", &stat)) return "gone";
  char state = 0;
  uint64_t ticks = 0;
  if (!ParseProcStat(stat, &state, &ticks)) return "gone";
  if (start_ticks != 0 && ticks != start_ticks) return "gone";  // pid reused
  return ProcStateName(state);
}

uint64_t ProcStartTicks(int32_t pid) {
  std::string stat;
  char state = 0;
  uint64_t ticks = 0;
  if (pid <= 0 || !ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", &stat)) return 0;
  return ParseProcStat(stat, &state, &ticks) ? ticks : 0;
}

int64_t ParseCpuTicks(const std::string& stat) {
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return -1;
  // After ") ": field 3 (state) onwards; utime is field 14, stime 15.
  const char* p = stat.c_str() + close_paren + 2;
  int field = 3;
  while (*p != '\0' && field < 14) {
    if (*p == ' ') ++field;
    ++p;
  }
  if (field != 14) return -1;
  char* end = nullptr;
  const long long utime = strtoll(p, &end, 10);
  if (end == p || *end != ' ') return -1;
  const char* q = end + 1;
  const long long stime = strtoll(q, &end, 10);
  if (end == q) return -1;
  return utime + stime;
}

int64_t ProcCpuTicks(int32_t pid) {
  std::string stat;
  if (pid <= 0 || !ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", &stat)) return -1;
  return ParseCpuTicks(stat);
}

std::string ThreadStates(int32_t pid, size_t max_threads) {
  if (pid <= 0) return "";
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(task.c_str());
  if (d == nullptr) return "";
  std::vector<long> tids;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long tid = strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && tid > 0) tids.push_back(tid);
  }
  closedir(d);
  std::sort(tids.begin(), tids.end(), [pid](long a, long b) {
    return (a == pid) != (b == pid) ? a == pid : a < b;  // main thread first
  });
  std::string out;
  size_t shown = 0;
  for (long tid : tids) {
    if (shown == max_threads) {
      out += "... " + std::to_string(tids.size() - shown) + " more threads\n";
      break;
    }
    const std::string dir = task + "/" + std::to_string(tid);
    std::string stat, wchan;
    if (!ReadSmallFile(dir + "/stat", &stat)) continue;  // the thread ended meanwhile
    const size_t open_paren = stat.find('('), close_paren = stat.rfind(')');
    if (open_paren == std::string::npos || close_paren == std::string::npos ||
        close_paren + 2 >= stat.size()) {
      continue;
    }
    std::string name = stat.substr(open_paren + 1, close_paren - open_paren - 1);
    for (char& c : name) {
      if (c == ' ' || c == '\n') c = '_';
    }
    if (!ReadSmallFile(dir + "/wchan", &wchan) || wchan.empty() || wchan == "0") wchan = "-";
    out += std::to_string(tid) + " " + name + " " + ProcStateName(stat[close_paren + 2]) + " " +
           wchan + "\n";
    ++shown;
  }
  return out;
}

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string cand = dirs.substr(start, end - start) + "/" + name;
    if (end > start && access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

RunResult RunWithTimeout(const std::vector<std::string>& argv, uint64_t timeout_ms,
                         size_t max_bytes) {
  RunResult r;
  if (argv.empty()) {
    r.error = "empty command";
    return r;
  }
  const std::string exe = FindInPath(argv[0]);
  if (exe.empty()) {
    r.error = argv[0] + " not found";
    return r;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + strerror(errno);
    return r;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) {
    r.error = std::string("fork: ") + strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (child == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(exe.c_str(), args.data());
    _exit(127);
  }
  setpgid(child, child);
  close(fds[1]);
  r.started = true;
  const uint64_t deadline = MonoMs() + timeout_ms;
  char buf[8192];
  for (;;) {
    uint64_t now = MonoMs();
    if (now >= deadline) {
      r.timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(std::min<uint64_t>(deadline - now, 100)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child closed its output
    size_t room = r.output.size() < max_bytes ? max_bytes - r.output.size() : 0;
    r.output.append(buf, std::min<size_t>(room, static_cast<size_t>(n)));
  }
  close(fds[0]);
  if (r.timed_out) kill(-child, SIGKILL);
  int status = 0;
  // After EOF the child exits promptly; bound the wait anyway.
  for (int i = 0; i < 200; ++i) {
    pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) {
      if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
      return r;
    }
    if (i == 100) kill(-child, SIGKILL);
    usleep(10000);
  }
  kill(-child, SIGKILL);
  waitpid(child, &status, 0);
  return r;
}

}  // namespace xpu::daemon
