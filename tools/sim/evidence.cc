#include "tools/sim/evidence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xpu::sim {
namespace {

std::string NativeStacks(int32_t pid, HangRole role) {
  std::string frames;
  switch (role) {
    case HangRole::kWaiting:
    case HangRole::kOtherSize:
    case HangRole::kLinkFrom:
      frames =
          "#0  0x00007f3a2c0a1b2c in sched_yield () from /lib/x86_64-linux-gnu/libc.so.6\n"
          "#1  0x00007f3a1b2c3d4e in ncclAllReduce () from /usr/lib/libnccl.so.2\n"
          "#2  0x00007f3a1a2b3c4d in c10d::ProcessGroupNCCL::allreduce () from "
          "libtorch_cuda.so\n";
      break;
    case HangRole::kStopped:
      frames =
          "#0  0x00007f3a2c0b2c3d in cudaLaunchKernel () from libcudart.so.13\n"
          "#1  0x00007f3a1a2b3c4d in at::native::gelu_kernel () from libtorch_cuda.so\n";
      break;
    default:
      break;
  }
  return absl::StrCat("Thread 1 (Thread 0x7f3a2d000740 (LWP ", pid, ") \"python\"):\n", frames,
                      "#", std::count(frames.begin(), frames.end(), '\n'),
                      "  0x00000000005a1b2c in _PyEval_EvalFrameDefault ()\n", "#",
                      std::count(frames.begin(), frames.end(), '\n') + 1,
                      "  0x0000000000401000 in main ()\n");
}

std::string PythonStacks(HangRole role, bool hung) {
  std::string inner;
  if (role == HangRole::kWaiting || role == HangRole::kOtherSize || role == HangRole::kLinkFrom) {
    inner =
        "  File \"/usr/lib/python3/torch/distributed/distributed_c10d.py\", line 2501 in "
        "all_reduce\n"
        "  File \"/opt/train/train.py\", line 188 in reduce_gradients\n";
  } else if (role == HangRole::kInPython) {
    inner =
        "  File \"/opt/train/data.py\", line 77 in wait_for_shard\n"
        "  File \"/opt/train/train.py\", line 171 in next_batch\n";
  } else if (!hung) {
    inner = "  File \"/opt/train/model.py\", line 52 in forward\n";
  }
  return absl::StrCat("Thread 0x00007f3a2d000740 (most recent call first):\n", inner,
                      "  File \"/opt/train/train.py\", line 212 in train_step\n",
                      "  File \"/opt/train/train.py\", line 340 in <module>\n");
}

void AddKernelProgress(const ClusterModel& m, int32_t rank, xpu::v1::ProcessEvidence* e) {
  const HangState& h = m.hang();
  const HangRole role = m.Role(rank);
  if (role != HangRole::kWaiting && role != HangRole::kLinkFrom) return;
  // Only a collective that hangs inside the kernel has ring counters that
  // stop somewhere: the rank after the stalled link received nothing.
  const std::vector<int32_t> members = m.StuckMembers();
  bool stalled_link = false;
  for (int32_t r : members) stalled_link |= m.Role(r) == HangRole::kLinkFrom;
  if (!stalled_link) return;
  const auto it = std::lower_bound(members.begin(), members.end(), rank);
  const int32_t pos = static_cast<int32_t>(it - members.begin());
  const int32_t n = static_cast<int32_t>(members.size());
  const int32_t prev = members[static_cast<size_t>((pos - 1 + n) % n)];
  xpu::v1::IntraKernelProgress* k = e->add_kernel();
  k->set_source("xpu-sim");
  k->set_channel(absl::StrCat("comm-", h.comm_id, "/ring0"));
  k->set_comm_rank(pos);
  k->set_comm_nranks(n);
  k->set_arrived_seq(h.seq);
  k->set_completed_seq(h.seq - 1);
  k->set_step(m.Role(prev) == HangRole::kLinkFrom ? 0 : 2);
  k->set_steps_total(2ull * static_cast<uint64_t>(n - 1));
  k->set_detail("simulated ring step counters");
}

}  // namespace

xpu::v1::ProcessEvidence MakeEvidence(const ClusterModel& m, int32_t rank, uint64_t now_ns,
                                      uint64_t hang_floor_ns) {
  xpu::v1::ProcessEvidence e;
  const HangRole role = m.Role(rank);
  const bool hung = m.hang().active;
  e.set_process_key(static_cast<uint64_t>(m.Pid(rank)));
  m.FillIdentity(rank, e.mutable_identity());
  e.set_proc_state(role == HangRole::kStopped ? "stopped" : hung ? "sleeping" : "running");
  e.set_native_stacks(NativeStacks(m.Pid(rank), role));
  e.set_native_tool("gdb");
  if (role == HangRole::kStopped) {
    e.set_python_error("python stacks unavailable: the process is stopped");
  } else {
    e.set_python_stacks(PythonStacks(role, hung));
  }
  m.FillProgress(rank, now_ns, hang_floor_ns, e.mutable_progress());
  e.set_gpu_health("ok (simulated GPU)");
  AddKernelProgress(m, rank, &e);
  e.set_collect_ms(5);
  return e;
}

xpu::v1::CommandReply AnswerCommand(const ClusterModel& m, int32_t host,
                                    const xpu::v1::Command& cmd, uint64_t now_ns,
                                    uint64_t hang_floor_ns) {
  xpu::v1::CommandReply reply;
  reply.set_command_id(cmd.command_id());
  const int32_t first = host * m.spec().ranks_per_host;
  const int32_t last = std::min(m.ranks(), first + m.spec().ranks_per_host);
  auto wanted = [&](int32_t r) {
    return cmd.ranks_size() == 0 ||
           std::find(cmd.ranks().begin(), cmd.ranks().end(), r) != cmd.ranks().end();
  };
  const bool this_job = cmd.job().empty() || cmd.job() == m.spec().job;
  if (cmd.kind() == "evidence") {
    xpu::v1::EvidenceReply ev;
    ev.set_host(m.HostName(host));
    for (int32_t r = first; this_job && r < last; ++r) {
      if (wanted(r)) *ev.add_processes() = MakeEvidence(m, r, now_ns, hang_floor_ns);
    }
    ev.set_elapsed_ms(5);
    reply.set_ok(true);
    reply.set_payload(ev.SerializeAsString());
  } else if (cmd.kind() == "history") {
    for (int32_t r = first; this_job && r < last; ++r) {
      if (!wanted(r)) continue;
      xpu::v1::ProcessBatch* pb = reply.add_processes();
      pb->set_process_key(static_cast<uint64_t>(m.Pid(r)));
      m.FillIdentity(r, pb->mutable_identity());
      m.AppendSignatures(r, pb);
      const std::vector<xpu_record_v1>& recs = m.Records(r);
      const size_t keep =
          cmd.last_n() > 0 ? std::min<size_t>(recs.size(), cmd.last_n()) : recs.size();
      pb->mutable_records()->assign(
          reinterpret_cast<const char*>(recs.data() + (recs.size() - keep)),
          keep * sizeof(xpu_record_v1));
    }
    reply.set_ok(true);
  } else if (cmd.kind() == "profile") {
    xpu::v1::ProfileReply pr;
    pr.set_host(m.HostName(host));
    for (int32_t r = first; this_job && r < last; ++r) {
      if (!wanted(r)) continue;
      xpu::v1::ProcessProfile* p = pr.add_processes();
      m.FillIdentity(r, p->mutable_identity());
      p->set_status("unsupported");
      p->set_reason("xpu-sim models no profiling window");
    }
    reply.set_ok(true);
    reply.set_payload(pr.SerializeAsString());
  } else {
    reply.set_ok(false);
    reply.set_error(absl::StrCat("unknown command: ", cmd.kind()));
  }
  return reply;
}

}  // namespace xpu::sim
