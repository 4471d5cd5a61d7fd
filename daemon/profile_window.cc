// profile_window.cc — see profile_window.h.
#include "daemon/profile_window.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/analysis/behavior_pattern.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "daemon/collector.h"
#include "daemon/profile_capture.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("profile");
  return logger;
}

namespace an = xpu::analysis;

// One process of a command.
struct Target {
  uint64_t key = 0;
  xpu::v1::ProcessIdentity identity;
  uint32_t req_id = 0;
  std::shared_ptr<ProfileCapture> capture;
  bool final = false;        // nothing more to wait for
  bool hook_final = false;   // the hook gave its final status
  uint64_t write_index = 0;  // at the moment the final status was seen
  uint32_t last_status = XPU_PROFILE_NONE;
  std::string status;  // when final without a summary
  std::string reason;
  xpu_ring_profile_ctl_v1 ctl{};
  std::vector<xpu_record_v1> records;
  std::map<uint32_t, ring::SignatureInfo> sigs;
  uint64_t dropped = 0;
};

}  // namespace

std::string ProfileStatusName(uint32_t status) {
  switch (status) {
    case XPU_PROFILE_NONE:
      return "no_answer";
    case XPU_PROFILE_STARTED:
      return "running";
    case XPU_PROFILE_DONE:
      return "done";
    case XPU_PROFILE_SKIPPED_OTHER_CLIENT:
      return "skipped_other_client";
    case XPU_PROFILE_SKIPPED_UNAVAILABLE:
      return "unavailable";
    case XPU_PROFILE_FAILED:
      return "failed";
    case XPU_PROFILE_REJECTED:
      return "rejected";
  }
  return "unknown";
}

std::string ProfileStatusReason(uint32_t status, int32_t detail) {
  switch (status) {
    case XPU_PROFILE_DONE:
      return "";
    case XPU_PROFILE_SKIPPED_OTHER_CLIENT:
      return absl::StrCat(
          "skipped: another CUPTI client is active (torch.profiler / Kineto, Nsight, a debugger); "
          "CUPTI result ",
          detail);
    case XPU_PROFILE_SKIPPED_UNAVAILABLE:
      switch (detail) {
        case -1:
          return "CUPTI unavailable: no libcupti found (set XPU_CUPTI_PATH)";
        case -2:
          return "profiling windows disabled in the process (XPU_PROFILE_WINDOWS=0)";
        case -3:
          return "CUPTI unavailable: libcupti lacks an entry point the window needs";
        case -4:
          return "no memory for CUPTI activity buffers";
        default:
          return absl::StrCat("CUPTI unavailable: cuptiSubscribe returned ", detail);
      }
    case XPU_PROFILE_FAILED:
      return detail == -4
                 ? "no memory for CUPTI activity buffers"
                 : absl::StrCat("a CUPTI call failed with result ", detail, "; CUPTI released");
    case XPU_PROFILE_REJECTED:
      return "the hook refused the window length";
    case XPU_PROFILE_STARTED:
      return "the window did not end in time";
    case XPU_PROFILE_NONE:
      return "the hook did not answer (completion thread not running?)";
  }
  return absl::StrCat("unknown hook status ", status);
}

xpu::v1::ProcessProfile SummarizeWindow(const xpu::v1::ProcessIdentity& identity,
                                        const std::vector<xpu_record_v1>& records,
                                        const std::map<uint32_t, ring::SignatureInfo>& sigs,
                                        const xpu_ring_profile_ctl_v1& ctl, size_t max_functions) {
  xpu::v1::ProcessProfile p;
  *p.mutable_identity() = identity;
  p.set_status("done");
  p.set_window_start_ns(ctl.window_start_ns);
  p.set_window_end_ns(ctl.window_end_ns);
  p.set_hook_flags(ctl.flags);
  an::RankTrace t;
  t.rank = identity.rank();
  t.host = identity.host();
  for (const auto& [id, info] : sigs) t.sigs[id] = an::OpSigFromAbi(info.sig, info.name);
  uint64_t window = 0;
  uint64_t last_end = 0;
  t.ops.reserve(records.size());
  for (const xpu_record_v1& r : records) {
    const an::OpSig* sig = t.Sig(r.sig_id);
    if (sig == nullptr) continue;
    const an::Op op = an::OpFromRecord(r, sig->kind);
    if (r.flags & XPU_REC_PROFILE_WINDOW) {
      ++window;
      last_end = std::max(last_end, op.end_ns());
    }
    t.ops.push_back(op);
  }
  t.Sort();
  p.set_kernel_records(window);
  // A hook that ended without an end time (cannot happen with ours) ends
  // with its last kernel.
  const uint64_t end = ctl.window_end_ns > ctl.window_start_ns ? ctl.window_end_ns : last_end;
  an::BehaviorOptions o;
  o.max_functions = max_functions;
  an::BehaviorSummary b = an::SummarizeBehavior(t, ctl.window_start_ns, end, o);
  p.set_t0_ns(b.t0_ns);
  p.set_t1_ns(b.t1_ns);
  p.set_iterations(b.iterations);
  p.set_step_source(b.iterations > 0 ? an::StepSourceName(b.step_source) : "");
  p.set_functions_omitted(b.functions_omitted);
  for (const an::FunctionSummary& f : b.functions) {
    xpu::v1::FunctionPattern* fp = p.add_functions();
    fp->set_name(f.name);
    fp->set_cls(static_cast<uint32_t>(f.cls));
    fp->set_beta(f.beta);
    fp->set_critical_ns(f.critical_ns);
    fp->set_executions(f.executions);
    fp->set_exec_ns(f.exec_ns);
    fp->set_inv_exec_per_s(f.inv_exec_per_s);
    fp->set_min_exec_ns(f.min_exec_ns);
  }
  return p;
}

ProfileRunner::ProfileRunner(Collector* collector, const ProfileOptions& options)
    : collector_(collector), options_(options) {}

ProfileRunner::~ProfileRunner() { Stop(); }

void ProfileRunner::Start(const xpu::v1::Command& command, ReplyFn done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) {
    xpu::v1::CommandReply r;
    r.set_command_id(command.command_id());
    r.set_ok(false);
    r.set_error("daemon stopping");
    done(std::move(r));
    return;
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished->load(std::memory_order_acquire)) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, command, done = std::move(done), finished] {
    Run(command, done);
    finished->store(true, std::memory_order_release);
  });
  workers_.push_back(Worker{std::move(t), std::move(finished)});
}

void ProfileRunner::Stop() {
  std::list<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    workers.swap(workers_);
  }
  for (Worker& w : workers) {
    if (w.thread.joinable()) w.thread.join();
  }
}

namespace {

// Claims the process's ring for a window of `duration_ms` and writes the
// request into it; a process that cannot take one is final at once, with
// the reason. Runs under the collector's lock.
Target RequestWindow(ProcessState& s, uint32_t duration_ms, uint32_t max_records,
                     size_t capture_limit) {
  Target t;
  t.key = s.key;
  FillIdentity(s, &t.identity);
  xpu_ring_profile_ctl_v1 ctl{};
  if (!s.reader->ReadProfileControl(&ctl)) {
    t.final = true;
    t.status = "failed";
    t.reason = "the ring's header page is unreadable";
  } else if (ctl.hook_magic != XPU_RING_PROFILE_MAGIC) {
    t.final = true;
    t.status = "unsupported";
    t.reason = "the hook in this process has no profiling windows (older version)";
  } else if (s.profile != nullptr) {
    t.final = true;
    t.status = "failed";
    t.reason = "another profiling window is running in this process";
  } else {
    t.req_id = std::max(ctl.req_id, static_cast<uint32_t>(ctl.ack >> 32)) + 1;
    if (t.req_id == 0) t.req_id = 1;
    t.capture = std::make_shared<ProfileCapture>(capture_limit);
    s.profile = t.capture;
    if (!s.reader->WriteProfileRequest(t.req_id, duration_ms, max_records, RealtimeNs())) {
      s.profile.reset();
      t.final = true;
      t.status = "failed";
      t.reason = "cannot write the request into the ring (read-only or lost mapping)";
    }
  }
  return t;
}

// One look at a target's process while the window runs: the hook's status,
// and whether the drain has read every record the hook wrote before its
// final status. The target becomes final once it has (its records are taken
// from the capture), or when the process exited, the wait is over (`late`)
// or the daemon stops. Runs under the collector's lock.
void Advance(Target& t, ProcessState& s, bool late, bool stop) {
  if (s.exited || s.reader == nullptr) {
    t.final = true;
    t.status = "exited";
    t.reason = "the process exited during the window";
    s.profile.reset();
    return;
  }
  xpu_ring_profile_ctl_v1 ctl{};
  if (!t.hook_final && s.reader->ReadProfileControl(&ctl) &&
      static_cast<uint32_t>(ctl.ack >> 32) == t.req_id) {
    t.last_status = static_cast<uint32_t>(ctl.ack & 0xffffffffu);
    if (t.last_status >= XPU_PROFILE_DONE) {
      t.hook_final = true;
      t.ctl = ctl;
      t.write_index = s.reader->ReadLiveState().write_index;
    }
  }
  // Every record the hook wrote before its final status has been read.
  const bool caught_up =
      t.hook_final && (s.reader->cursor() >= t.write_index || s.reader->faulted());
  if (!caught_up && !late && !stop) return;
  t.final = true;
  if (t.capture != nullptr) {
    t.records = std::move(t.capture->records);
    t.dropped = t.capture->dropped;
  }
  s.profile.reset();
  if (!caught_up) {
    t.status = "timeout";
    t.reason = stop ? "daemon stopping" : ProfileStatusReason(t.last_status, 0);
  } else if (t.last_status != XPU_PROFILE_DONE) {
    t.status = ProfileStatusName(t.last_status);
    t.reason = ProfileStatusReason(t.last_status, t.ctl.detail);
  } else {
    // Every signature read so far (thousands at most, unlike the records):
    // cheap under the lock.
    for (const ring::SignatureInfo& info : s.signatures) t.sigs[info.sig.commit] = info;
  }
}

// The reply's entry for one target: the window's behaviour summary, or the
// status and reason it has none.
void Summarize(const Target& t, size_t max_functions, xpu::v1::ProcessProfile* p) {
  if (t.status.empty()) {
    *p = SummarizeWindow(t.identity, t.records, t.sigs, t.ctl, max_functions);
  } else {
    *p->mutable_identity() = t.identity;
    p->set_status(t.status);
    p->set_reason(t.reason);
    p->set_window_start_ns(t.ctl.window_start_ns);
    p->set_window_end_ns(t.ctl.window_end_ns);
    p->set_hook_flags(t.ctl.flags);
  }
  p->set_kernels_dropped(t.ctl.dropped + t.dropped);
}

}  // namespace

void ProfileRunner::Run(const xpu::v1::Command& command, const ReplyFn& done) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const uint32_t duration_ms =
      std::clamp<uint32_t>(command.profile_ms() > 0 ? command.profile_ms() : options_.default_ms, 1,
                           XPU_PROFILE_MAX_DURATION_MS);
  uint64_t wait_ms = duration_ms + options_.grace_ms;
  // Answer before the engine gives up on the command.
  if (command.deadline_ms() > 2000)
    wait_ms = std::min<uint64_t>(wait_ms, command.deadline_ms() - 1000);
  const auto until = t0 + std::chrono::milliseconds(wait_ms);
  const std::set<int32_t> ranks(command.ranks().begin(), command.ranks().end());

  // 1. Capture and request, per process.
  std::vector<Target> targets;
  std::vector<xpu::v1::ProcessProfile> refused;
  collector_->ForEachProcess([&](ProcessState& s) {
    if (s.reader == nullptr || s.exited || s.disconnected) return;
    if (!command.job().empty() && s.identity.job != command.job()) return;
    if (!ranks.empty() && !ranks.count(s.identity.rank)) return;
    std::string why;
    if (!collector_->MayAct(command, s, &why)) {
      xpu::v1::ProcessProfile p;
      FillIdentity(s, p.mutable_identity());
      p.set_status("refused");
      p.set_reason(why);
      refused.push_back(std::move(p));
      return;
    }
    targets.push_back(RequestWindow(s, duration_ms, command.profile_max_records(),
                                    options_.max_records_per_process));
  });
  Log()->info("profile command {}: job {} window {} ms, {} processes", command.command_id(),
              command.job(), duration_ms, targets.size());

  // 2. Wait for the hooks and the drain.
  auto pending = [&] {
    return std::any_of(targets.begin(), targets.end(), [](const Target& t) { return !t.final; });
  };
  while (pending()) {
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop = stopping_;
    }
    const bool late = Clock::now() >= until;
    std::set<uint64_t> seen;
    collector_->ForEachProcess([&](ProcessState& s) {
      for (Target& t : targets) {
        if (t.final || t.key != s.key) continue;
        seen.insert(s.key);
        Advance(t, s, late, stop);
      }
    });
    for (Target& t : targets) {
      if (!t.final && !seen.count(t.key)) {
        t.final = true;  // retired from the table
        t.status = "exited";
        t.reason = "the process is gone";
      }
    }
    if (!pending()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.poll_ms));
  }

  // 3. Summaries, without the lock.
  xpu::v1::ProfileReply reply;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  reply.set_host(host);
  for (const Target& t : targets) {
    xpu::v1::ProcessProfile* p = reply.add_processes();
    Summarize(t, options_.max_functions, p);
    Log()->info("profile command {}: rank {} pid {}: {}{}{} ({} kernel records, {} functions)",
                command.command_id(), t.identity.rank(), t.identity.pid(), p->status(),
                p->reason().empty() ? "" : ": ", p->reason(), p->kernel_records(),
                p->functions_size());
  }
  for (auto& p : refused) *reply.add_processes() = std::move(p);
  if (!refused.empty()) {
    Log()->warn("profile command {}: refused for {} processes: {}", command.command_id(),
                refused.size(), refused.front().reason());
  }
  reply.set_elapsed_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  xpu::v1::CommandReply r;
  r.set_command_id(command.command_id());
  r.set_ok(true);
  r.set_payload(reply.SerializeAsString());
  done(std::move(r));
}

}  // namespace xpu::daemon
