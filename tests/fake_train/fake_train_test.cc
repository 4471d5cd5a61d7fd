// tests/fake_train/fake_train_test.cc — multi-process tests of the fake
// runtime through xpu-fake-launch and xpu-fake-train: a 4-rank run whose API
// call counts match --print-plan exactly, failure and timeout propagation by
// the launcher, and the hang model (a SIGSTOPped rank blocks the others
// inside the collective, visible in the shared-memory arrival counters;
// SIGCONT releases them).
//
// Every wait has a deadline far above what a loaded 2-core machine needs; no
// assertion depends on wall-clock speed. Thread-safety: single-threaded; the
// processes under test are children in their own process group.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_nccl_shm.h"

namespace {

using Clock = std::chrono::steady_clock;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/xpu-fake-train-test.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// Starts argv with extra environment; stdout+stderr go to `log`.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // own group, so that cleanup can signal everything
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    for (const std::string& kv : env) putenv(strdup(kv.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits for pid up to `timeout`; returns its wait status, or -1 on timeout.
int WaitFor(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 || Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Stops a launcher still running at scope exit (test failure paths): SIGTERM
// first so that it removes its temporary files and segment, then SIGKILL for
// its whole process group.
struct GroupKiller {
  pid_t pgid;
  ~GroupKiller() {
    if (pgid <= 0 || kill(-pgid, 0) != 0) return;
    kill(-pgid, SIGCONT);
    kill(pgid, SIGTERM);
    if (WaitFor(pgid, std::chrono::seconds(10)) == -1) {
      kill(-pgid, SIGKILL);
      waitpid(pgid, nullptr, 0);
    }
    kill(-pgid, SIGKILL);  // ranks that outlived the launcher, if any
  }
};

std::map<std::string, long> ParsePlan(const std::string& text, int* steps) {
  std::map<std::string, long> per_step;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string plan, kind, api;
    long n;
    ls >> plan >> kind;
    if (kind == "steps") {
      ls >> *steps;
    } else if (kind == "per_step" && (ls >> api >> n)) {
      per_step[api] = n;
    }
  }
  return per_step;
}

std::map<std::string, long> ParseCounts(const std::string& text) {
  std::map<std::string, long> counts;
  std::istringstream in(text);
  std::string api;
  long n;
  while (in >> api >> n) counts[api] = n;
  return counts;
}

TEST(FakeTrain, FourRanksThroughLauncherMatchThePlan) {
  TempDir dir;
  const std::vector<std::string> train_args = {XPU_FAKE_TRAIN_PATH,  "--steps",  "6", "--use-lt",
                                               "--sync-every-layer", "--layers", "3"};
  // The plan for these options.
  std::vector<std::string> plan_argv = train_args;
  plan_argv.push_back("--print-plan");
  pid_t p = Spawn(plan_argv, {}, dir.path + "/plan.txt");
  ASSERT_EQ(WaitFor(p, std::chrono::seconds(30)), 0);
  int steps = 0;
  auto per_step = ParsePlan(ReadFile(dir.path + "/plan.txt"), &steps);
  ASSERT_EQ(steps, 6);
  ASSERT_EQ(per_step.size(), 15u);
  EXPECT_EQ(per_step["cublasLtMatmul"], 3);         // --use-lt, 3 layers
  EXPECT_EQ(per_step["cudaStreamSynchronize"], 4);  // --sync-every-layer

  std::vector<std::string> argv = {XPU_FAKE_LAUNCH_PATH, "--nproc", "4", "--timeout", "120", "--"};
  argv.insert(argv.end(), train_args.begin(), train_args.end());
  pid_t launcher =
      Spawn(argv, {"XPU_FAKE_CALL_COUNTS=" + dir.path + "/counts"}, dir.path + "/run.log");
  GroupKiller killer{launcher};
  int status = WaitFor(launcher, std::chrono::seconds(150));
  std::string log = ReadFile(dir.path + "/run.log");
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << log;
  ASSERT_EQ(WEXITSTATUS(status), 0) << log;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(log.find("rank " + std::to_string(r) + " done 6 steps"), std::string::npos) << log;
    auto counts = ParseCounts(ReadFile(dir.path + "/counts.rank" + std::to_string(r)));
    for (const auto& [api, n] : per_step) {
      EXPECT_EQ(counts[api], n * steps) << "rank " << r << " " << api;
    }
    EXPECT_EQ(counts["ncclCommInitRank"], 1);
    EXPECT_EQ(counts["ncclGetUniqueId"], r == 0 ? 1 : 0);  // only rank 0 creates the id
  }
}

TEST(FakeTrain, LauncherReportsAFailedRank) {
  TempDir dir;
  pid_t launcher =
      Spawn({XPU_FAKE_LAUNCH_PATH, "--nproc", "3", "--timeout", "120", "--", XPU_FAKE_TRAIN_PATH,
             "--steps", "50", "--exit-at", "2", "--fault-rank", "1"},
            {}, dir.path + "/run.log");
  GroupKiller killer{launcher};
  int status = WaitFor(launcher, std::chrono::seconds(150));
  std::string log = ReadFile(dir.path + "/run.log");
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 3) << log;  // the failed rank's status
  EXPECT_NE(log.find("rank 1 exiting at step 2"), std::string::npos) << log;
  EXPECT_EQ(log.find("done 50 steps"), std::string::npos) << log;  // the others were stopped
}

TEST(FakeTrain, LauncherTimeoutKillsAHungJob) {
  TempDir dir;
  const std::string pid_file = dir.path + "/pids";
  pid_t launcher =
      Spawn({XPU_FAKE_LAUNCH_PATH, "--nproc", "2", "--timeout", "3", "--pid-file", pid_file, "--",
             XPU_FAKE_TRAIN_PATH, "--steps", "1000", "--hang-at", "1", "--fault-rank", "0"},
            {}, dir.path + "/run.log");
  GroupKiller killer{launcher};
  int status = WaitFor(launcher, std::chrono::seconds(60));
  std::string log = ReadFile(dir.path + "/run.log");
  ASSERT_TRUE(status != -1 && WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 124) << log;
  EXPECT_NE(log.find("rank 0 hanging at step 1"), std::string::npos) << log;
  std::istringstream pids(ReadFile(pid_file));
  int rank, pid, n = 0;
  while (pids >> rank >> pid) {
    ++n;
    EXPECT_NE(kill(pid, 0), 0) << "rank " << rank << " survived the launcher";
  }
  EXPECT_EQ(n, 2);
}

// Read-only view of a communicator's segment.
class SegmentView {
 public:
  bool Open(const std::string& name) {
    int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd < 0) return false;
    struct stat st;
    bool ok = fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(*seg_));
    if (ok) {
      void* p = mmap(nullptr, sizeof(*seg_), PROT_READ, MAP_SHARED, fd, 0);
      ok = p != MAP_FAILED;
      if (ok) seg_ = static_cast<const xpu_fake_nccl_segment*>(p);
    }
    close(fd);
    return ok;
  }
  ~SegmentView() {
    if (seg_) munmap(const_cast<xpu_fake_nccl_segment*>(seg_), sizeof(*seg_));
  }
  uint64_t Arrived(int r) const {
    return __atomic_load_n(&seg_->slots[r].coll_arrived, __ATOMIC_ACQUIRE);
  }
  uint64_t Completed(int r) const {
    return __atomic_load_n(&seg_->slots[r].coll_completed, __ATOMIC_ACQUIRE);
  }
  int Pid(int r) const { return seg_->slots[r].pid; }
  std::vector<uint64_t> Snapshot(int n) const {
    std::vector<uint64_t> v;
    for (int r = 0; r < n; ++r) {
      v.push_back(Arrived(r));
      v.push_back(Completed(r));
    }
    return v;
  }

 private:
  const xpu_fake_nccl_segment* seg_ = nullptr;
};

TEST(FakeTrain, StoppedRankBlocksTheOthersInTheCollective) {
  constexpr int kRanks = 4, kStopped = 2;
  TempDir dir;
  const std::string id_file = dir.path + "/nccl_id";
  pid_t launcher =
      Spawn({XPU_FAKE_LAUNCH_PATH, "--nproc", std::to_string(kRanks), "--timeout", "300", "--",
             XPU_FAKE_TRAIN_PATH, "--steps", "100000000", "--layers", "2", "--hidden", "256",
             "--tokens", "256", "--step-sleep-ms", "1", "--nccl-id-file", id_file},
            {}, dir.path + "/run.log");
  GroupKiller killer{launcher};

  // The segment is named after the id that rank 0 publishes. The launcher
  // only removes segments of ids it handed out itself, so this test removes
  // the one of its own --nccl-id-file.
  SegmentView seg;
  struct Unlinker {
    std::string name;
    ~Unlinker() {
      if (!name.empty()) shm_unlink(name.c_str());
    }
  } unlinker;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  bool open = false;
  while (!open && Clock::now() < deadline) {
    std::string id = ReadFile(id_file);
    if (id.size() >= 32) unlinker.name = XPU_FAKE_NCCL_SHM_PREFIX + id.substr(0, 32);
    open = !unlinker.name.empty() && seg.Open(unlinker.name);
    if (!open) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(open) << ReadFile(dir.path + "/run.log");

  auto min_completed = [&] {
    uint64_t m = UINT64_MAX;
    for (int r = 0; r < kRanks; ++r) m = std::min(m, seg.Completed(r));
    return m;
  };
  while (min_completed() < 20 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(min_completed(), 20u) << ReadFile(dir.path + "/run.log");

  pid_t stopped = seg.Pid(kStopped);
  ASSERT_GT(stopped, 0);
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);

  // Wait until no counter has moved for 1.5 s.
  std::vector<uint64_t> last = seg.Snapshot(kRanks);
  auto stable_since = Clock::now();
  deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() - stable_since < std::chrono::milliseconds(1500) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<uint64_t> now = seg.Snapshot(kRanks);
    if (now != last) {
      last = now;
      stable_since = Clock::now();
    }
  }
  ASSERT_GE(Clock::now() - stable_since, std::chrono::milliseconds(1500))
      << "counters kept moving with rank " << kStopped << " stopped";
  const uint64_t a = seg.Arrived(kStopped);
  for (int r = 0; r < kRanks; ++r) {
    if (r == kStopped) continue;
    // Nobody completes a collective the stopped rank has not reached, and
    // nobody gets more than one collective ahead of it.
    EXPECT_LE(seg.Completed(r), a) << "rank " << r;
    EXPECT_LE(seg.Arrived(r), a + 1) << "rank " << r;
  }
  // Still blocked a while later: a hang, not a slow step.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(seg.Snapshot(kRanks), last);
  // The status tool reports the same counters and names the stopped rank as
  // the one behind when the others wait for it in a collective.
  pid_t tool =
      Spawn({XPU_FAKE_NCCL_STATUS_PATH, "--id-file", id_file}, {}, dir.path + "/status.txt");
  ASSERT_EQ(WaitFor(tool, std::chrono::seconds(30)), 0);
  std::string report = ReadFile(dir.path + "/status.txt");
  EXPECT_NE(report.find("rank 2 pid " + std::to_string(stopped)), std::string::npos) << report;
  EXPECT_NE(report.find("coll_arrived " + std::to_string(a) + " "), std::string::npos) << report;
  // The stopped rank is always behind. It is the only one only when every
  // other rank already waits in the next collective: a neighbour blocked in
  // the step's send/recv with the stopped rank has not arrived there yet and
  // is listed too (its arrival count is equally low).
  const size_t behind = report.find("behind ");
  ASSERT_NE(behind, std::string::npos) << report;
  const std::string behind_line =
      " " + report.substr(behind + 7, report.find('\n', behind) - behind - 7) + " ";
  EXPECT_NE(behind_line.find(" 2 "), std::string::npos) << report;
  bool all_others_wait_in_collective = true;
  for (int r = 0; r < kRanks; ++r) {
    if (r != kStopped && seg.Arrived(r) <= a) all_others_wait_in_collective = false;
  }
  if (all_others_wait_in_collective) {
    EXPECT_NE(report.find("behind 2\n"), std::string::npos) << report;
  }

  ASSERT_EQ(kill(stopped, SIGCONT), 0);
  const uint64_t resume_target = a + 10;
  deadline = Clock::now() + std::chrono::seconds(60);
  while (min_completed() < resume_target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(min_completed(), resume_target) << "SIGCONT did not release the ranks";

  // The launcher forwards termination to the ranks and cleans up.
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  int status = WaitFor(launcher, std::chrono::seconds(60));
  ASSERT_NE(status, -1);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  for (int r = 0; r < kRanks; ++r) EXPECT_NE(kill(seg.Pid(r), 0), 0) << "rank " << r;
}

}  // namespace
