// external_process — helpers for end-to-end tests that run real external
// services (prometheus-alertmanager, prometheus) on free loopback ports with
// their own temporary directories: a free port, start with argv, wait for an
// HTTP readiness URL, stop (SIGTERM, then SIGKILL) exactly the process we
// started, and a one-thread HTTP sink that records POSTed bodies.
#ifndef XPU_TESTS_SCENARIOS_EXTERNAL_PROCESS_H_
#define XPU_TESTS_SCENARIOS_EXTERNAL_PROCESS_H_

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/alerting/http_client.h"

namespace xpu::scenarios {

inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

inline std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl = (std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                     ("/" + prefix + "XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : std::string();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

class ExternalProcess {
 public:
  ExternalProcess() = default;
  ExternalProcess(const ExternalProcess&) = delete;
  ~ExternalProcess() { Stop(); }
  // Starts argv[0] with stdout/stderr to `log_path`; false if fork failed.
  bool Start(const std::vector<std::string>& argv, const std::string& log_path) {
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log) {
        dup2(fileno(log), 1);
        dup2(fileno(log), 2);
      }
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    return true;
  }
  bool Running() {
    if (pid_ <= 0) return false;
    int status;
    return waitpid(pid_, &status, WNOHANG) == 0;
  }
  // Polls `url` until it answers 200 or the process exits or time runs out.
  bool WaitReady(const std::string& url, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      if (!Running()) return false;
      auto r = engine::HttpRequest("GET", url, "", "", 2000);
      if (r.ok() && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

// Accepts HTTP requests on a loopback port and keeps the bodies of POSTs.
class HttpSink {
 public:
  HttpSink() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 16);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~HttpSink() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  std::vector<std::string> Bodies() {
    std::lock_guard<std::mutex> l(mu_);
    return bodies_;
  }

 private:
  void Loop() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[8192];
      size_t need = std::string::npos;
      while (true) {
        ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        size_t h = req.find("\r\n\r\n");
        if (h != std::string::npos && need == std::string::npos) {
          size_t cl = req.find("Content-Length: ");
          need = h + 4 + (cl != std::string::npos && cl < h ? std::stoul(req.substr(cl + 16)) : 0);
        }
        if (need != std::string::npos && req.size() >= need) break;
      }
      size_t h = req.find("\r\n\r\n");
      if (h != std::string::npos) {
        std::lock_guard<std::mutex> l(mu_);
        bodies_.push_back(req.substr(h + 4));
      }
      const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      send(c, resp, sizeof(resp) - 1, MSG_NOSIGNAL);
      close(c);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::thread thread_;
};

}  // namespace xpu::scenarios

#endif  // XPU_TESTS_SCENARIOS_EXTERNAL_PROCESS_H_
