// xpu-daemon: flags, logging, signals, detaching; everything else is in
// xpu_daemon_lib (see daemon.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "daemon/daemon.h"
#include "daemon/options.h"

namespace {

// Forks; the parent waits until the child reports (through a pipe) that its
// socket is ready and exits with the child's verdict, so whoever started the
// daemon (the hook's auto-start) may connect as soon as it returns.
int Detach(int* ready_fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid > 0) {
    close(p[1]);
    char status = 1;
    const ssize_t n = read(p[0], &status, 1);
    _exit(n == 1 && status == 0 ? 0 : 1);
  }
  close(p[0]);
  setsid();
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    dup2(devnull, STDIN_FILENO);
    dup2(devnull, STDOUT_FILENO);
  }
  *ready_fd = p[1];
  return 0;
}

void ReportReady(int ready_fd, bool ok) {
  if (ready_fd < 0) return;
  const char status = ok ? 0 : 1;
  (void)!write(ready_fd, &status, 1);
  close(ready_fd);
}

std::string Dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace xpu::daemon;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto options = ParseDaemonOptions(args);
  if (!options.ok()) {
    fprintf(stderr, "xpu-daemon: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    fputs(DaemonHelpText().c_str(), stdout);
    return 0;
  }
  if (options->version) {
    printf("%s\n", xpu::flags::VersionLine("xpu-daemon").c_str());
    return 0;
  }
  auto config = MakeDaemonConfig(*options, xpu::flags::Version());
  if (!config.ok()) {
    fprintf(stderr, "xpu-daemon: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }

  umask(077);  // logs and sockets are private to the daemon's user
  int ready_fd = -1;
  if (!options->foreground && Detach(&ready_fd) != 0) {
    perror("xpu-daemon: fork");
    return 1;
  }
  // Logging: one sink shared by every component logger.
  std::string log_file = options->log_file;
  if (log_file.empty() && !options->foreground)
    log_file = Dir(config->hook.socket.path) + "/daemon.log";
  if (absl::Status st = xpu::logging::InitLogging({"xpu-daemon", options->log_level, log_file});
      !st.ok()) {
    xpu::logging::GetLogger("daemon")->warn("{}; logging to stderr", std::string(st.message()));
  }
  if (!options->foreground && ready_fd >= 0) {
    const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDERR_FILENO);
  }

  // Signals are taken synchronously by this thread; every other thread
  // inherits the blocked mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Daemon daemon(*config);
  absl::Status s = daemon.Start();
  if (!s.ok()) {
    xpu::logging::GetLogger("daemon")->error("cannot start: {}", s.ToString());
    if (options->foreground) fprintf(stderr, "xpu-daemon: %s\n", s.ToString().c_str());
    ReportReady(ready_fd, false);
    return 1;
  }
  ReportReady(ready_fd, true);
  for (;;) {
    // Woken once a second to see whether an idle daemon should go.
    const struct timespec tick = {1, 0};
    const int sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig < 0) {
      if (errno == EAGAIN && daemon.IdleExpired(xpu::MonotonicNs())) {
        xpu::logging::GetLogger("daemon")->info(
            "no traced process and nothing to send for {} s (--idle-exit-s): shutting down",
            options->idle_exit_s);
        break;
      }
      continue;
    }
    if (sig == SIGHUP) {
      xpu::logging::GetLogger("daemon")->info("SIGHUP ignored (flags are read at start)");
      continue;
    }
    xpu::logging::GetLogger("daemon")->info("signal {}: shutting down", sig);
    break;
  }
  daemon.Stop();
  return 0;
}
