// tests/e2e_hook/e2e_util.cc — see e2e_util.h.
#include "e2e_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace xpu::e2e {

RunResult Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              int timeout_s) {
  RunResult res;
  TempDir io;
  const std::string out_path = io.path() + "/out", err_path = io.path() + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) _exit(127);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) return res;
  setpgid(pid, pid);  // either side may win the race; both set the same group
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int wstatus = 0;
  for (;;) {
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      res.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(wstatus)) {
    res.exited = !res.timed_out;
    res.status = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    res.signal = WTERMSIG(wstatus);
  }
  res.out = ReadFile(out_path);
  res.err = ReadFile(err_path);
  return res;
}

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/xpu-e2e-hook.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty() || getenv("XPU_E2E_KEEP") != nullptr) return;
  for (const auto& f : ListFiles(path_, "")) unlink(f.c_str());
  rmdir(path_.c_str());
}

Fields ParseFields(const std::string& line, std::string* tag) {
  Fields f;
  std::istringstream in(line);
  std::string word;
  bool first = true;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos) {
      if (first && tag != nullptr) *tag = word;
    } else {
      f[word.substr(0, eq)] = word.substr(eq + 1);
    }
    first = false;
  }
  return f;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> ListFiles(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == ".." || n.compare(0, prefix.size(), prefix) != 0) continue;
    struct stat st;
    std::string p = dir + "/" + n;
    if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(p);
  }
  closedir(d);
  return out;
}

uint64_t ToU64(const std::string& s) { return strtoull(s.c_str(), nullptr, 10); }

}  // namespace xpu::e2e
