// daemon/evidence/evidence_collector.cc — see evidence_collector.h.
#include "daemon/evidence/evidence_collector.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/base/clock.h"
#include "common/cuda_gdb/cuda_gdb.h"
#include "daemon/evidence/cuda_gdb_probe.h"
#include "daemon/evidence/fake_nccl_probe.h"
#include "daemon/evidence/gpu_health.h"
#include "daemon/evidence/process_probe.h"

namespace xpu::daemon {
namespace {

uint64_t MonoMs() { return MonotonicNs() / 1000000; }

bool Alive(const std::string& state) {
  return state != "gone" && state != "zombie" && state != "dead";
}

// Blind progress reads: cuda-gdb kernel ids and blocks (channels) visited.
constexpr int kProbeKernels = 3;
constexpr int kProbeChannels = 16;

bool IsCudaGdb(const std::string& debugger) {
  return debugger.size() >= 8 && debugger.compare(debugger.size() - 8, 8, "cuda-gdb") == 0;
}

// Native stacks of all threads. The debugger attaches (stopping the process
// for the time of the backtrace) and detaches when -batch ends.
// `list_kernels` (cuda-gdb only): the same attach also lists the CUDA
// kernels and reads the NCCL channels' ring counters, for the intra-kernel
// probe.
void NativeStacks(const EvidenceTarget& t, const EvidenceOptions& o,
                  const std::string& state_before, uint64_t budget_ms, bool list_kernels,
                  xpu::v1::ProcessEvidence* ev) {
  if (o.debugger == "none") {
    ev->set_native_error("native stacks disabled");
    return;
  }
  if (!Alive(state_before)) {
    ev->set_native_error("process " + state_before + ": no stacks");
    return;
  }
  ev->set_native_tool(o.debugger);
  // No debuginfod downloads (a stuck network must not eat the deadline);
  // the index cache makes every later attach to the same binaries cheap. A
  // debugger without these settings prints an error and carries on.
  std::vector<std::string> argv = {o.debugger,
                                   "-p",
                                   std::to_string(t.pid),
                                   "-batch",
                                   "-nx",
                                   "-q",
                                   "-iex",
                                   "set debuginfod enabled off",
                                   "-iex",
                                   "set index-cache enabled on",
                                   "-ex",
                                   "set pagination off",
                                   "-ex",
                                   "set print thread-events off",
                                   "-ex",
                                   "thread apply all bt"};
  if (list_kernels) {
    // Kernel list and ring counters in the same attach (attaching to a
    // PyTorch process takes seconds; a second attach would double that).
    xpu::cuda_gdb::AppendExCommands(
        xpu::cuda_gdb::BlindProgressCommands(kProbeKernels, kProbeChannels), &argv);
  }
  argv.insert(argv.end(), {"-ex", "detach"});
  RunResult r = RunWithTimeout(argv, budget_ms, o.max_stack_bytes);
  if (!r.started) {
    ev->set_native_error(r.error);
    return;
  }
  if (r.timed_out) {
    ev->set_native_error("debugger timed out after " + std::to_string(budget_ms) + " ms");
    // A debugger killed mid-attach can leave its stop pending: resume a
    // process that was not stopped before we came.
    if (state_before != "stopped" && ProcState(t.pid, t.start_ticks) == "stopped") {
      kill(t.pid, SIGCONT);
    }
  } else if (r.output.find("#0") == std::string::npos) {
    ev->set_native_error("no frames from " + o.debugger + " (exit " + std::to_string(r.exit_code) +
                         "); ptrace not permitted?");
  }
  ev->set_native_stacks(r.output);
}

// Opens the faulthandler file of `pid` if it can only have come from that
// process's user: the directory is that user's (or root's) and writable by
// nobody else, its parent cannot be used to swap it (sticky or private), the
// file is a regular file of the process's uid (the kernel's: the owner of
// /proc/<pid>), not writable by others, and no symlink is followed. Returns
// -1 with `why` otherwise.
int OpenTrustedPystackFile(const std::string& dir, const std::string& file, int32_t pid,
                           std::string* why) {
  struct stat proc_st;
  if (stat(("/proc/" + std::to_string(pid)).c_str(), &proc_st) != 0) {
    *why = "process gone";
    return -1;
  }
  const uid_t uid = proc_st.st_uid;
  auto private_to = [uid](const struct stat& st) {
    return (st.st_uid == uid || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
  };
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !private_to(st)) {
    *why = dir + " is not a directory of uid " + std::to_string(uid) +
           " (or root) writable by nobody else";
    return -1;
  }
  const size_t slash = dir.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "."
                             : slash == 0                ? "/"
                                                         : dir.substr(0, slash);
  if (stat(parent.c_str(), &st) != 0 || (!private_to(st) && (st.st_mode & S_ISVTX) == 0)) {
    *why = parent + " lets other users replace " + dir;
    return -1;
  }
  const int fd = open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *why = file + ": " + strerror(errno);
    return -1;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    close(fd);
    *why = file + " is not a private file of uid " + std::to_string(uid);
    return -1;
  }
  return fd;
}

// Reads from `fd` at `offset` up to `max` bytes.
std::string ReadFrom(int fd, off_t offset, size_t max) {
  std::string out;
  char buf[8192];
  while (out.size() < max) {
    const ssize_t n = pread(fd, buf, std::min(sizeof(buf), max - out.size()), offset);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

// Python stacks: the package's faulthandler file, else py-spy.
void PythonStacks(const EvidenceTarget& t, const EvidenceOptions& o, const std::string& state,
                  uint64_t budget_ms, xpu::v1::ProcessEvidence* ev) {
  if (!Alive(state)) {
    ev->set_python_error("process " + state);
    return;
  }
  const std::string file = o.pystack_dir + "/xpu-pystack-" + std::to_string(t.pid) + ".txt";
  struct stat st;
  if (!o.pystack_dir.empty() && stat(file.c_str(), &st) == 0) {
    if (state == "stopped") {
      ev->set_python_error("process stopped: it cannot run its faulthandler");
      return;
    }
    std::string why;
    const int fd = OpenTrustedPystackFile(o.pystack_dir, file, t.pid, &why);
    if (fd < 0) {
      ev->set_python_error("faulthandler file not trusted (" + why + "): not signalled");
      return;
    }
    // The file must be this very process's (pystacks.py writes
    // "xputimer-pystacks pid P start T"): a signal to a process that only
    // reuses the pid could kill it.
    std::istringstream head(ReadFrom(fd, 0, 256));
    std::string tag;
    long long pid = 0;
    std::string start_word;
    unsigned long long start = 0;
    std::string pid_word;
    head >> tag >> pid_word >> pid >> start_word >> start;
    const uint64_t ticks = ProcStartTicks(t.pid);
    if (tag != "xputimer-pystacks" || pid != t.pid || ticks == 0 || start != ticks) {
      close(fd);
      ev->set_python_error("faulthandler file " + file +
                           " belongs to another process: not signalled");
      return;
    }
    fstat(fd, &st);
    const off_t before = st.st_size;
    kill(t.pid, o.pystack_signal);
    // faulthandler writes from the signal handler; wait until the file stops
    // growing (or the budget ends).
    const uint64_t end = MonoMs() + std::min<uint64_t>(budget_ms, 3000);
    off_t last = before;
    int stable = 0;
    while (MonoMs() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (fstat(fd, &st) != 0) break;
      if (st.st_size > before && st.st_size == last) {
        if (++stable >= 2) break;
      } else {
        stable = 0;
      }
      last = st.st_size;
    }
    const std::string text = ReadFrom(fd, before, o.max_stack_bytes);
    close(fd);
    if (text.empty()) {
      ev->set_python_error("faulthandler file " + file + " did not grow after the signal");
    } else {
      ev->set_python_stacks(text);
    }
    return;
  }
  if (!FindInPath("py-spy").empty()) {
    RunResult r = RunWithTimeout({"py-spy", "dump", "--pid", std::to_string(t.pid)}, budget_ms,
                                 o.max_stack_bytes);
    if (r.exit_code == 0 && !r.output.empty()) {
      ev->set_python_stacks(r.output);
    } else {
      ev->set_python_error("py-spy failed: " + r.output.substr(0, 200));
    }
    return;
  }
  ev->set_python_error("python stacks unavailable (no faulthandler registration at " + file +
                       ", no py-spy)");
}

}  // namespace

EvidenceOptions EvidenceOptionsFromEnv() {
  EvidenceOptions o;
  const char* dbg = getenv("XPU_EVIDENCE_DEBUGGER");
  if (dbg != nullptr && *dbg != '\0') {
    o.debugger = dbg;
  } else {
    o.debugger = !FindInPath("cuda-gdb").empty() ? "cuda-gdb" : "gdb";
  }
  const char* dir = getenv("XPU_PYSTACK_DIR");
  o.pystack_dir = dir != nullptr && *dir != '\0'
                      ? dir
                      : "/tmp/xpu-" + std::to_string(static_cast<unsigned>(getuid())) + "/pystacks";
  const char* sig = getenv("XPU_PYSTACK_SIGNAL");
  o.pystack_signal = sig != nullptr ? atoi(sig) : 0;
  if (o.pystack_signal <= 0 || o.pystack_signal >= NSIG) o.pystack_signal = SIGUSR2;
  o.fake_nccl = FakeNcclProbeEnabled();
  return o;
}

EvidenceMode EvidenceModeFromString(const std::string& mode) {
  return mode == "quick" ? EvidenceMode::kQuick : EvidenceMode::kFull;
}

bool WantsDebugger(const std::string& debugger, const std::string& state, bool kernels_stuck,
                   bool python_possible, std::string* why_not) {
  if (debugger == "none") {
    *why_not = "native stacks disabled";
    return false;
  }
  if (!Alive(state)) {
    *why_not = "process " + state + ": no stacks";
    return false;
  }
  if (!IsCudaGdb(debugger) || kernels_stuck) return true;
  // cuda-gdb takes seconds per attach on a PyTorch process: only where the
  // kernels are stuck, or where nothing else can say where the process is.
  if (state == "stopped" || state == "tracing-stop") {
    *why_not = "not attached: the process is stopped and no kernel of it is stuck";
    return false;
  }
  if (python_possible) {
    *why_not = "not attached: no kernel of this process is stuck (its Python stacks say where it is)";
    return false;
  }
  return true;
}

namespace {

// A sample of the CPU the process uses, over at least `min_ms` from
// `ticks0` taken at `t0_ms`: CPUs busy (1.0 = one core), -1 unknown.
double CpuBusy(int32_t pid, int64_t ticks0, uint64_t t0_ms, uint64_t min_ms) {
  if (ticks0 < 0) return -1;
  const uint64_t waited = MonoMs() - t0_ms;
  if (waited < min_ms) std::this_thread::sleep_for(std::chrono::milliseconds(min_ms - waited));
  const int64_t ticks1 = ProcCpuTicks(pid);
  const uint64_t span_ms = MonoMs() - t0_ms;
  const long hz = sysconf(_SC_CLK_TCK);
  if (ticks1 < ticks0 || span_ms == 0 || hz <= 0) return -1;
  return static_cast<double>(ticks1 - ticks0) / static_cast<double>(hz) /
         (static_cast<double>(span_ms) / 1000.0);
}

bool KernelsStuck(const EvidenceTarget& t, PendingCollective* pending) {
  if (!t.has_progress) return false;
  const bool collective = FindPendingCollective(t.progress, pending);
  return collective || t.progress.suspect();
}

// One process's evidence of `mode` within `budget` ms.
void CollectOne(const EvidenceTarget& t, const EvidenceOptions& options, uint64_t budget,
                EvidenceMode mode, xpu::v1::ProcessEvidence* ev) {
  const uint64_t start = MonoMs();
  ev->set_process_key(t.process_key);
  *ev->mutable_identity() = t.identity;
  ev->set_exited(t.exited);
  if (t.has_progress) *ev->mutable_progress() = t.progress;
  const std::string state = t.exited ? "gone" : ProcState(t.pid, t.start_ticks);
  ev->set_proc_state(state);
  ev->set_cpu_busy(-1);
  if (!Alive(state)) {
    ev->set_native_error("process " + state + ": no stacks");
    ev->set_python_error("process " + state);
    ev->set_collect_ms(MonoMs() - start);
    return;
  }
  // Counters and thread states before anything could stop the process.
  const int64_t ticks0 = ProcCpuTicks(t.pid);
  if (options.fake_nccl) {
    for (auto& k : ProbeFakeNccl(t.pid)) *ev->add_kernel() = std::move(k);
  }
  ev->set_threads(ThreadStates(t.pid));
  const bool python_registered =
      !options.pystack_dir.empty() &&
      access((options.pystack_dir + "/xpu-pystack-" + std::to_string(t.pid) + ".txt").c_str(),
             F_OK) == 0;
  if (mode == EvidenceMode::kQuick) {
    PythonStacks(t, options, state, std::min<uint64_t>(budget, 3000), ev);
    ev->set_cpu_busy(CpuBusy(t.pid, ticks0, start, 200));
    ev->set_native_error("not collected in the quick pass");
    ev->set_collect_ms(MonoMs() - start);
    return;
  }
  ev->set_cpu_busy(CpuBusy(t.pid, ticks0, start, 200));
  PendingCollective pending;
  const bool stuck = KernelsStuck(t, &pending);
  std::string why_not;
  if (!WantsDebugger(options.debugger, state, stuck,
                     python_registered || !FindInPath("py-spy").empty(), &why_not)) {
    ev->set_native_error(why_not);
  } else {
    // With an outstanding collective on real GPUs the same attach also
    // lists the CUDA kernels and reads the NCCL kernels' ring progress
    // (cuda_gdb_probe.h).
    const bool probe = !options.fake_nccl && IsCudaGdb(options.debugger) && state != "stopped" &&
                       stuck && pending.pending_seq != 0;
    const uint64_t used = MonoMs() - start;
    NativeStacks(t, options, state, budget > used ? budget - used : 100, probe, ev);
    if (probe) {
      const std::string& text = ev->native_stacks();
      const size_t at = text.find("XPU-CUDA-KERNELS");
      if (at != std::string::npos) {
        const std::string_view tail = std::string_view(text).substr(at);
        for (auto& k : ChannelsToProgress(tail, tail, pending)) *ev->add_kernel() = std::move(k);
      }
    }
  }
  ev->set_python_error("collected in the quick pass");
  ev->set_collect_ms(MonoMs() - start);
}

}  // namespace

xpu::v1::EvidenceReply CollectEvidence(const std::vector<EvidenceTarget>& targets,
                                       const EvidenceOptions& options, uint64_t deadline_ms,
                                       EvidenceMode mode) {
  const uint64_t t0 = MonoMs();
  xpu::v1::EvidenceReply reply;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  reply.set_host(host);
  const std::string gpu = GpuHealthSummary();
  std::vector<xpu::v1::ProcessEvidence> out(targets.size());
  std::vector<std::thread> threads;
  const uint64_t budget = deadline_ms > 500 ? deadline_ms - 500 : deadline_ms;
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back([&, i] {
      CollectOne(targets[i], options, budget, mode, &out[i]);
      out[i].set_gpu_health(gpu);
    });
  }
  for (std::thread& th : threads) th.join();
  for (auto& ev : out) *reply.add_processes() = std::move(ev);
  reply.set_elapsed_ms(MonoMs() - t0);
  return reply;
}

}  // namespace xpu::daemon
