// daemon/evidence/evidence_unittest.cc — process probes, the progress-table
// reader and a real evidence collection from a child process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "daemon/evidence/cuda_gdb_probe.h"
#include "daemon/evidence/evidence_collector.h"
#include "daemon/evidence/process_probe.h"
#include "daemon/evidence/ring_progress.h"
#include "xpu/ring.h"

namespace xpu::daemon {
namespace {

TEST(ProcessProbeTest, ParsesStatWithAwkwardComm) {
  std::string stat = "1234 (a) b (c)) T 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 98765 20 21";
  char state = 0;
  uint64_t ticks = 0;
  ASSERT_TRUE(ParseProcStat(stat, &state, &ticks));
  EXPECT_EQ(state, 'T');
  EXPECT_EQ(ticks, 98765u);
  EXPECT_FALSE(ParseProcStat("garbage", &state, &ticks));
  EXPECT_EQ(ProcStateName('D'), "disk-sleep");
  EXPECT_EQ(ProcStateName('Z'), "zombie");
}

TEST(ProcessProbeTest, StatesOfRealProcesses) {
  EXPECT_EQ(ProcState(getpid(), 0), "running");
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ProcState(child, 0), "sleeping");
  kill(child, SIGSTOP);
  for (int i = 0; i < 100 && ProcState(child, 0) != "stopped"; ++i) usleep(10000);
  EXPECT_EQ(ProcState(child, 0), "stopped");
  EXPECT_EQ(ProcState(child, 1), "gone");  // start time mismatch: pid reuse
  kill(child, SIGKILL);
  for (int i = 0; i < 100 && ProcState(child, 0) != "zombie"; ++i) usleep(10000);
  EXPECT_EQ(ProcState(child, 0), "zombie");
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ProcState(child, 0), "gone");
}

TEST(ProcessProbeTest, RunWithTimeoutKillsOverrunningHelpers) {
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = RunWithTimeout({"sleep", "30"}, 300, 1024);
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  RunResult ok = RunWithTimeout({"echo", "hello"}, 5000, 3);
  EXPECT_FALSE(ok.timed_out);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.output, "hel");  // truncated to max_bytes
  EXPECT_FALSE(RunWithTimeout({"no-such-helper-xyz"}, 100, 10).started);
}

TEST(RingProgressTest, ParsesStableEntriesAndSkipsTornOnes) {
  std::vector<uint8_t> a(XPU_RING_HEADER_SIZE, 0);
  auto* t = reinterpret_cast<xpu_ring_progress_v1*>(a.data() + XPU_RING_PROGRESS_OFFSET);
  xpu::v1::HangProgress out;
  EXPECT_FALSE(ParseProgress(a.data(), a.data(), a.size(), nullptr, &out));  // no table
  t->magic = XPU_RING_PROGRESS_MAGIC;
  t->ncomms = XPU_RING_PROGRESS_COMMS;
  t->suspect_sig_id = 7;
  t->suspect_seq = 12;
  t->suspect_stream = 2;
  t->suspect_since_ns = 1000;
  t->suspect_comm_id = 0x55;
  t->comms[0] = xpu_comm_progress_v1{};
  t->comms[0].comm_id = 0x55;
  t->comms[0].last_issued_seq = 12;
  t->comms[0].last_completed_seq = 11;
  t->comms[0].pending_seq = 12;
  t->comms[0].pending_kind = XPU_OP_ALLREDUCE;
  t->comms[0].pending_sig_id = 7;
  t->comms[0].flags = XPU_PROGRESS_SUSPECT;
  t->comms[1].comm_id = 0x66;
  t->comms[1].gen = 3;  // writer in progress
  t->comms[2].comm_id = 0x77;
  t->comms[2].last_issued_seq = 1;
  t->comms[2].last_completed_seq = 5;  // impossible: rejected
  std::vector<uint8_t> b = a;
  auto name_of = [](uint32_t id) { return id == 7 ? std::string("ncclAllReduce") : std::string(); };
  ASSERT_TRUE(ParseProgress(a.data(), b.data(), a.size(), name_of, &out));
  EXPECT_TRUE(out.suspect());
  EXPECT_EQ(out.suspect_seq(), 12u);
  EXPECT_EQ(out.suspect_stream(), 2u);
  EXPECT_EQ(out.suspect_name(), "ncclAllReduce");
  ASSERT_EQ(out.comms_size(), 1);
  EXPECT_EQ(out.comms(0).comm_id(), 0x55u);
  EXPECT_TRUE(out.comms(0).suspect());
  EXPECT_EQ(out.comms(0).pending_name(), "ncclAllReduce");
  // A copy that changed in between: the entry is not trusted.
  auto* tb = reinterpret_cast<xpu_ring_progress_v1*>(b.data() + XPU_RING_PROGRESS_OFFSET);
  tb->comms[0].last_completed_seq = 12;
  ASSERT_TRUE(ParseProgress(a.data(), b.data(), a.size(), name_of, &out));
  EXPECT_EQ(out.comms_size(), 0);
}

// The hook's oldest outstanding collective is what the kernels belong to.
TEST(CudaGdbProbeTest, PendingCollectiveIsTheOldestOutstanding) {
  xpu::v1::HangProgress p;
  PendingCollective pc;
  EXPECT_FALSE(FindPendingCollective(p, &pc));
  auto* idle = p.add_comms();
  idle->set_last_completed_seq(9);
  auto* late = p.add_comms();
  late->set_pending_seq(12);
  late->set_pending_since_ns(2000);
  late->set_comm_rank(3);
  auto* old = p.add_comms();
  old->set_pending_seq(40);
  old->set_pending_since_ns(1000);
  old->set_last_completed_seq(39);
  old->set_comm_rank(1);
  old->set_comm_nranks(2);
  ASSERT_TRUE(FindPendingCollective(p, &pc));
  EXPECT_EQ(pc.pending_seq, 40u);
  EXPECT_EQ(pc.completed_seq, 39u);
  EXPECT_EQ(pc.comm_rank, 1);
  EXPECT_EQ(pc.comm_nranks, 2);
}

// Output shaped like cuda-gdb's (kernel list and devices from the
// native-stack run, then the progress commands): an LL ring kernel of 4
// ranks on an sm_90 device, read at both shared-window bases.
std::string Block(int block, int base, const std::string& body) {
  const std::string id = "kernel=0 channel=" + std::to_string(block);
  return "XPU-NCCL-BEGIN " + id + " base=" + std::to_string(base) + "\n" + body + "XPU-NCCL-END " +
         id + " base=" + std::to_string(base) + "\n";
}

TEST(CudaGdbProbeTest, ChannelsBecomeIntraKernelProgressWithErrorsKept) {
  const std::string list =
      "XPU-CUDA-KERNELS\n"
      "  Kernel Parent Dev Grid Status   SMs Mask   GridDim  BlockDim Invocation\n"
      "*      0      -   0    7 Active 0x00000003 (2,1,1) (640,1,1) "
      "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)\n"
      "XPU-CUDA-DEVICES\n"
      "  Dev PCI Bus/Dev ID                Name Description SM Type SMs Warps/SM Lanes/Warp Max "
      "Regs/Lane\n"
      "*   0        18:00.0 NVIDIA H200      GH100-A       sm_90   132       64         32         "
      "  256\n";
  // Block 0: readable at 0x400 (1024); recv step 24, slot flags up to 27 ->
  // 3 steps received in this kernel. At 0 (the reserved window): zeros.
  const std::string progress =
      Block(0, 1024,
            "XPU-NCCL kernel=0 channel=0 channel_id=0 ring_prev=3 ring_next=1 ring_index=0\n"
            "XPU-NCCL kernel=0 channel=0 recv_step=24 recv_tail=0\n"
            "XPU-NCCL kernel=0 channel=0 send_step=26 send_head=0\n"
            "XPU-NCCL kernel=0 channel=0 ll_flags=25,26,27,20,21,22,23,24\n"
            "XPU-NCCL kernel=0 channel=0 ll128_flags=0,0,0,0,0,0,0,0\n") +
      Block(0, 0,
            "XPU-NCCL kernel=0 channel=0 channel_id=0 ring_prev=0 ring_next=0 ring_index=0\n") +
      Block(1, 1024, "Cannot access memory at address 0x7f0000000000\n") +
      Block(1, 0,
            "XPU-NCCL kernel=0 channel=1 channel_id=0 ring_prev=0 ring_next=0 ring_index=0\n");
  PendingCollective pc;
  pc.comm_rank = 0;
  pc.comm_nranks = 4;
  pc.pending_seq = 40;
  pc.completed_seq = 39;
  std::vector<xpu::v1::IntraKernelProgress> out = ChannelsToProgress(list, progress, pc);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].source(), "cuda-gdb");
  EXPECT_EQ(out[0].channel(), "ch0");
  EXPECT_EQ(out[0].step(), 3u);  // LL: highest slot flag - recv step
  EXPECT_EQ(out[0].sent(), 0u);  // head 0 < send step 26: nothing consumed
  EXPECT_NE(out[0].detail().find("received 3 step(s) in this kernel (LL counters)"),
            std::string::npos);
  EXPECT_EQ(out[0].ring_prev(), 3);
  EXPECT_EQ(out[0].ring_next(), 1);
  EXPECT_EQ(out[0].arrived_seq(), 40u);
  EXPECT_NE(out[0].detail().find(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL block 0 channel 0 (ncclShmem at 1024)"),
            std::string::npos);
  // Block 1: the read at 0x400 failed and the one at 0 is dropped (sm_90).
  EXPECT_EQ(out[1].ring_next(), -1);
  EXPECT_NE(out[1].detail().find("not readable: Cannot access memory"), std::string::npos);
  // Without the device list the base is unknown: both readings count, and
  // the base-0 zeros are rejected (prev == next in a ring of 4).
  const std::string no_devices = list.substr(0, list.find("XPU-CUDA-DEVICES"));
  out = ChannelsToProgress(no_devices, progress, pc);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step(), 3u);
  EXPECT_EQ(out[0].ring_next(), 1);
  EXPECT_EQ(out[1].ring_next(), -1);
  out = ChannelsToProgress(no_devices,
                           Block(1, 0,
                                 "XPU-NCCL kernel=0 channel=1 channel_id=0 ring_prev=2 "
                                 "ring_next=2 ring_index=0\n"),
                           pc);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ring_next(), -1);
  EXPECT_NE(out[0].detail().find("implausible ring (prev 2, next 2, channel 0 for rank 0 of 4)"),
            std::string::npos);
  // Blind reads of a kernel id the list does not show as NCCL, or of a block
  // beyond the grid, are dropped.
  const std::string blind =
      progress +
      Block(2, 1024,
            "XPU-NCCL kernel=0 channel=2 channel_id=2 ring_prev=3 ring_next=1 ring_index=0\n") +
      "XPU-NCCL-BEGIN kernel=1 channel=0 base=1024\nXPU-NCCL kernel=1 channel=0 ring_prev=3 "
      "ring_next=1\n"
      "XPU-NCCL-END kernel=1 channel=0 base=1024\n";
  EXPECT_EQ(ChannelsToProgress(list, blind, pc).size(), 2u);
  // The channel id names the ring channel (NCCL may map blocks to channels
  // other than 0..n-1).
  const std::string mapped =
      Block(1, 1024,
            "XPU-NCCL kernel=0 channel=1 channel_id=5 ring_prev=2 ring_next=3 ring_index=1\n"
            "XPU-NCCL kernel=0 channel=1 recv_step=100 recv_tail=0\n"
            "XPU-NCCL kernel=0 channel=1 ll_flags=101,102,95,96,97,98,99,100\n");
  out = ChannelsToProgress(list, mapped, pc);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].channel(), "ch5");
  EXPECT_EQ(out[0].step(), 2u);
  // No NCCL kernel listed: nothing.
  EXPECT_TRUE(ChannelsToProgress("No CUDA kernels.\n", progress, pc).empty());
}

TEST(EvidenceCollectorTest, CollectsStateAndNativeStacksOfALiveProcess) {
  if (FindInPath("gdb").empty()) GTEST_SKIP() << "gdb not installed";
  pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EvidenceTarget t;
  t.pid = child;
  t.identity.set_rank(3);
  EvidenceTarget gone;
  gone.pid = 0;
  gone.exited = true;
  gone.identity.set_rank(4);
  EvidenceOptions o;
  o.debugger = "gdb";
  o.pystack_dir = "/nonexistent";
  o.pystack_signal = SIGUSR2;
  xpu::v1::EvidenceReply r = CollectEvidence({t, gone}, o, 30000, EvidenceMode::kFull);
  ASSERT_EQ(r.processes_size(), 2);
  const auto& ev = r.processes(0);
  EXPECT_EQ(ev.identity().rank(), 3);
  EXPECT_EQ(ev.proc_state(), "sleeping");
  if (ev.native_error().empty()) {
    EXPECT_NE(ev.native_stacks().find("#0"), std::string::npos) << ev.native_stacks();
    EXPECT_NE(ev.native_stacks().find("pause"), std::string::npos) << ev.native_stacks();
  } else {
    ADD_FAILURE() << "native stacks: " << ev.native_error() << "\n" << ev.native_stacks();
  }
  EXPECT_NE(ev.python_error().find("quick pass"), std::string::npos) << ev.python_error();
  EXPECT_FALSE(ev.gpu_health().empty());
  // The quick pass: no debugger, the thread states, the CPU sample and the
  // (missing) Python stacks.
  const xpu::v1::EvidenceReply q = CollectEvidence({t}, o, 10000, EvidenceMode::kQuick);
  ASSERT_EQ(q.processes_size(), 1);
  const auto& qe = q.processes(0);
  EXPECT_TRUE(qe.native_stacks().empty());
  EXPECT_NE(qe.python_error().find("unavailable"), std::string::npos);
  EXPECT_NE(qe.threads().find(std::to_string(child) + " "), std::string::npos) << qe.threads();
  EXPECT_NE(qe.threads().find(" sleeping "), std::string::npos) << qe.threads();
  EXPECT_GE(qe.cpu_busy(), 0.0);
  EXPECT_LT(qe.cpu_busy(), 0.1);  // pause()d: no CPU at all
  // The process was detached and runs on.
  EXPECT_EQ(ProcState(child, 0), "sleeping");
  EXPECT_EQ(r.processes(1).proc_state(), "gone");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

#ifdef XPU_PYTHON_SRC
// The Python side's faulthandler registration (python/xputimer/pystacks.py)
// and the daemon's reading of it, with a real interpreter.
TEST(EvidenceCollectorTest, PythonStacksThroughTheFaulthandlerFile) {
  if (FindInPath("python3").empty()) GTEST_SKIP() << "python3 not installed";
  char dir_tmpl[] = "/tmp/xpu-pystack-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string dir = dir_tmpl;
  pid_t child = fork();
  if (child == 0) {
    setenv("XPU_PYSTACK_DIR", dir.c_str(), 1);
    const std::string code =
        std::string("import sys, time; sys.path.insert(0, '") + XPU_PYTHON_SRC +
        "'); from xputimer import pystacks; assert pystacks.install()\n"
        "def wait_in_checkpoint():\n    time.sleep(60)\nwait_in_checkpoint()\n";
    execlp("python3", "python3", "-c", code.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  const std::string file = dir + "/xpu-pystack-" + std::to_string(child) + ".txt";
  for (int i = 0; i < 200 && access(file.c_str(), R_OK) != 0; ++i) usleep(20000);
  usleep(200000);  // the registration follows the header line
  EvidenceTarget t;
  t.pid = child;
  EvidenceOptions o;
  o.debugger = "none";
  o.pystack_dir = dir;
  o.pystack_signal = SIGUSR2;
  xpu::v1::EvidenceReply r = CollectEvidence({t}, o, 10000, EvidenceMode::kQuick);
  ASSERT_EQ(r.processes_size(), 1);
  EXPECT_NE(r.processes(0).python_stacks().find("in wait_in_checkpoint"), std::string::npos)
      << r.processes(0).python_error();
  EXPECT_EQ(ProcState(child, 0), "sleeping");  // the signal did not hurt it
  // A file whose header names another process is never acted on.
  EvidenceTarget other;
  other.pid = getpid();
  std::string mine = dir + "/xpu-pystack-" + std::to_string(getpid()) + ".txt";
  FILE* f = fopen(mine.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fprintf(f, "xputimer-pystacks pid %d start 1\n", static_cast<int>(getpid()));
  fclose(f);
  r = CollectEvidence({other}, o, 5000, EvidenceMode::kQuick);
  EXPECT_NE(r.processes(0).python_error().find("belongs to another process"), std::string::npos)
      << r.processes(0).python_error();
  // A directory another user could write (the /tmp/xpu-0 trick): the real
  // process's file is not trusted and the process is not signalled.
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  r = CollectEvidence({t}, o, 5000, EvidenceMode::kQuick);  // the quick pass takes Python stacks
  EXPECT_NE(r.processes(0).python_error().find("not trusted"), std::string::npos)
      << r.processes(0).python_error();
  EXPECT_EQ(ProcState(child, 0), "sleeping");
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  // Nor a file that is not the process's user's own private file.
  ASSERT_EQ(chmod(file.c_str(), 0666), 0);
  r = CollectEvidence({t}, o, 5000, EvidenceMode::kQuick);
  EXPECT_NE(r.processes(0).python_error().find("not a private file"), std::string::npos)
      << r.processes(0).python_error();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  unlink(mine.c_str());
  unlink(file.c_str());
  rmdir(dir.c_str());
}
#endif

TEST(EvidenceCollectorTest, DebuggerOnlyWhereItIsNeeded) {
  std::string why;
  // gdb is cheap: every live process.
  EXPECT_TRUE(WantsDebugger("gdb", "sleeping", false, true, &why));
  EXPECT_TRUE(WantsDebugger("gdb", "stopped", false, false, &why));
  EXPECT_FALSE(WantsDebugger("gdb", "gone", true, false, &why));
  EXPECT_FALSE(WantsDebugger("none", "sleeping", true, false, &why));
  EXPECT_EQ(why, "native stacks disabled");
  // cuda-gdb: processes whose kernels are stuck ...
  EXPECT_TRUE(WantsDebugger("/usr/local/cuda/bin/cuda-gdb", "sleeping", true, true, &why));
  // ... not a stopped one or one whose Python stacks say where it is ...
  EXPECT_FALSE(WantsDebugger("cuda-gdb", "stopped", false, false, &why));
  EXPECT_NE(why.find("stopped"), std::string::npos);
  EXPECT_FALSE(WantsDebugger("cuda-gdb", "sleeping", false, true, &why));
  EXPECT_NE(why.find("Python stacks"), std::string::npos);
  // ... but one with no other evidence of where it is.
  EXPECT_TRUE(WantsDebugger("cuda-gdb", "running", false, false, &why));
}

TEST(ProcessProbeTest, CpuTicksAndThreadStates) {
  EXPECT_EQ(ParseCpuTicks("12 (a b) S 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20 0 1 0 99 0"), 290);
  EXPECT_EQ(ParseCpuTicks("12 (x) S 1 2"), -1);
  EXPECT_EQ(ParseCpuTicks("garbage"), -1);
  EXPECT_GE(ProcCpuTicks(getpid()), 0);
  EXPECT_EQ(ProcCpuTicks(0), -1);
  const std::string mine = ThreadStates(getpid());
  ASSERT_FALSE(mine.empty());
  // The main thread comes first.
  EXPECT_EQ(mine.rfind(std::to_string(getpid()) + " ", 0), 0u) << mine;
  EXPECT_EQ(ThreadStates(0), "");
}

}  // namespace
}  // namespace xpu::daemon
