#include "engine/window/window_view.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>

namespace xpu::engine {

std::string WindowView::HostOf(int32_t rank) const {
  // ranks is sorted by rank (Get): a binary search, so that naming the hosts
  // of many ranks stays linear in the job's size.
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank,
                             [](const analysis::RankTrace& t, int32_t r) { return t.rank < r; });
  return it != ranks.end() && it->rank == rank ? it->host : "";
}

const xpu::v1::ProcessIdentity& WindowView::IdentityOf(int32_t rank) const {
  static const xpu::v1::ProcessIdentity kNone;
  auto it = identities.find(rank);
  return it != identities.end() ? it->second : kNone;
}

template <typename T, typename Find>
const T& WindowView::Cached(const analysis::RankTrace& t, std::optional<T> RankFigures::*member,
                            Find find) const {
  if (ranks.empty() || &t < ranks.data() || &t >= ranks.data() + ranks.size()) {
    thread_local T scratch;
    scratch = find();
    return scratch;
  }
  if (figures_.size() != ranks.size()) figures_.resize(ranks.size());
  std::optional<T>& slot = figures_[static_cast<size_t>(&t - ranks.data())].*member;
  if (!slot) slot = find();
  return *slot;
}

const analysis::Steps& WindowView::StepsOf(const analysis::RankTrace& t) const {
  return Cached(t, &RankFigures::steps, [&t] { return analysis::FindSteps(t); });
}

const analysis::VoidFigures& WindowView::VoidOf(const analysis::RankTrace& t) const {
  return Cached(t, &RankFigures::voids, [&] { return analysis::ComputeVoid(t, StepsOf(t)); });
}

const std::map<std::string, analysis::GemmStat>& WindowView::GemmsOf(
    const analysis::RankTrace& t) const {
  return Cached(t, &RankFigures::gemms,
                [&t] { return analysis::GemmTflops(t, 0, UINT64_MAX, /*mark_concurrent=*/true); });
}

const std::vector<analysis::CommBandwidth>& WindowView::Communicators() const {
  if (!comms_) comms_ = analysis::CommunicatorBandwidth(ranks);
  return *comms_;
}

void WindowView::FindAll(int threads) const {
  if (figures_.size() != ranks.size()) figures_.resize(ranks.size());
  std::thread comms;
  if (!comms_) comms = std::thread([this] { Communicators(); });
  auto part = [this](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {  // distinct slots per thread
      VoidOf(ranks[i]);                   // and its steps
      GemmsOf(ranks[i]);
    }
  };
  InParts(ranks.size(), threads, 256, part);
  if (comms.joinable()) comms.join();
}

const WindowView& WindowViews::Get(const JobState& job) { return Make(job, nullptr, 1, {}); }

const WindowView& WindowViews::BuildAndTrim(JobState& job, size_t keep, size_t pace_keep,
                                            int threads, WindowCut cut) {
  const ProcessState* pace = job.PaceProcess();
  return Make(
      job,
      [pace, keep, pace_keep](ProcessState& p, size_t held) {
        p.ring.Trim(std::max(held, &p == pace ? std::max(keep, pace_keep) : keep));
      },
      threads, cut);
}

namespace {

// One analysis copy of each of the job's signatures (the job's processes
// share their SignatureInfo entries: SignaturePool), for the traces built on
// one thread.
using SharedSigs = std::unordered_map<const SignatureInfo*, std::shared_ptr<const analysis::OpSig>>;

// The trace of one rank from the newest `n` records of its ring, oldest
// first, up to the first that started in [cut.end_ns, cut.next_ns);
// *taken: how many it read (the others wait for the next window). No
// record read: no trace (rank -1).
analysis::RankTrace TraceOf(const ProcessState& p, size_t n, WindowCut cut, SharedSigs* shared,
                            size_t* taken) {
  analysis::RankTrace t;
  // One pass over the ring (its chunks are decoded as they are read). The
  // ops' room is the window's largest allocation: the records after the
  // cut (a grace period's, a tenth) are given back below.
  t.ops.reserve(n);
  const size_t i = p.ring.WhileLast(n, [&](const xpu_record_v1& r) {
    if (r.start_ns >= cut.end_ns && r.start_ns < cut.next_ns) return false;
    const SignatureInfo* s = p.sigs.Find(r.sig_id);
    if (s == nullptr) return true;
    if (!t.sigs.count(r.sig_id)) {
      std::shared_ptr<const analysis::OpSig>& sig = (*shared)[s];
      if (!sig)
        sig = std::make_shared<const analysis::OpSig>(analysis::OpSigFromAbi(s->abi, s->name));
      t.sigs.Share(r.sig_id, sig);
    }
    t.ops.emplace_back(analysis::OpFromRecord(r, s->abi.kind));
    return true;
  });
  if (t.ops.capacity() > t.ops.size() + t.ops.size() / 32) t.ops.shrink_to_fit();
  *taken = i;
  if (i == 0) return {};
  t.rank = p.identity.rank();
  t.host = p.identity.host();
  t.Sort();
  return t;
}

}  // namespace

const WindowView& WindowViews::Make(const JobState& job, const Trim& trim, int threads,
                                    WindowCut cut) {
  PerJob& pj = jobs_[job.job()];
  if (pj.built && pj.view.window_id == job.window_start_ns()) {
    if (trim) {
      for (const auto& [key, p] : job.processes()) {
        const uint64_t written = p->ring.written();
        const uint64_t cur = std::min(pj.cursor[key], written);
        trim(*p, static_cast<size_t>(std::min<uint64_t>(written - cur, p->ring.held())));
      }
    }
    return pj.view;
  }
  WindowView v;
  v.window_id = job.window_start_ns();
  v.backbone = job.job_name();
  v.gpu_model = job.GpuModel();
  // The ranks with records since the last view (one thread), then their
  // traces, in parallel parts: the window tick builds the view holding the
  // job's lock, which stops the job's ingest (100k ranks' took 4 s on one
  // thread). A rank's records from the first that started after the cut
  // stay in its ring: its cursor stops before them.
  struct Fresh {
    ProcessState* p;
    size_t n;
    uint64_t* cursor;  // ring.written() once read: less the records held
  };
  std::vector<Fresh> fresh;
  for (const auto& [key, p] : job.processes()) {
    const uint64_t written = p->ring.written();
    uint64_t& cur = pj.cursor[key];
    if (cur > written) cur = 0;  // a restarted rank's ring is new
    const uint64_t n = written - cur;
    if (p->identity.rank() < 0 || n == 0) {
      cur = written;
      if (trim) trim(*p, 0);
      continue;
    }
    fresh.push_back({p.get(), static_cast<size_t>(std::min<uint64_t>(n, p->ring.held())), &cur});
  }
  v.ranks.resize(fresh.size());
  auto part = [&](size_t from, size_t to) {
    SharedSigs shared;
    for (size_t i = from; i < to; ++i) {  // distinct processes and slots per thread
      const Fresh& f = fresh[i];
      size_t taken = 0;
      v.ranks[i] = TraceOf(*f.p, f.n, cut, &shared, &taken);
      *f.cursor = f.p->ring.written() - (f.n - taken);
      if (trim) trim(*f.p, f.n - taken);
    }
  };
  InParts(fresh.size(), threads, 1024, part);
  size_t kept = 0;  // the ranks with records in the window, in place
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (v.ranks[i].rank < 0) continue;  // every record held for the next window
    v.identities[fresh[i].p->identity.rank()] = fresh[i].p->identity;
    if (kept != i) v.ranks[kept] = std::move(v.ranks[i]);
    ++kept;
  }
  v.ranks.resize(kept);
  v.first_ns = UINT64_MAX;
  for (const analysis::RankTrace& r : v.ranks) {
    v.records += r.ops.size();
    for (const analysis::Op& op : r.ops) {
      v.first_ns = std::min(v.first_ns, op.start_ns);
      v.last_ns = std::max(v.last_ns, op.end_ns());
    }
  }
  if (v.records == 0) v.first_ns = 0;
  std::sort(
      v.ranks.begin(), v.ranks.end(),
      [](const analysis::RankTrace& a, const analysis::RankTrace& b) { return a.rank < b.rank; });
  pj.view = std::move(v);
  pj.built = true;
  return pj.view;
}

void WindowViews::Release(const std::string& job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.view = WindowView{};
  it->second.built = false;
}

void WindowViews::Retain(const std::vector<std::string>& jobs) {
  std::set<std::string> keep(jobs.begin(), jobs.end());
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = keep.count(it->first) ? std::next(it) : jobs_.erase(it);
  }
}

Diagnosis NewDiagnosis(const JobState& job, std::string kind, Team team) {
  Diagnosis d;
  d.job = job.job();
  d.kind = std::move(kind);
  d.team = team;
  d.first_seen_ns = job.window_start_ns();
  d.last_seen_ns = job.window_start_ns();
  return d;
}

std::vector<std::string> HostsOf(const WindowView& v, const std::vector<int32_t>& ranks) {
  std::set<std::string> hosts;
  for (int32_t r : ranks) {
    std::string h = v.HostOf(r);
    if (!h.empty()) hosts.insert(h);
  }
  return {hosts.begin(), hosts.end()};
}

std::string Fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace xpu::engine
