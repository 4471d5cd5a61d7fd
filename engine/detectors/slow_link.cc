#include "engine/detectors/slow_link.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/analysis/collective.h"
#include "common/analysis/gemm.h"
#include "common/analysis/stats.h"

namespace xpu::engine {
namespace {

std::string Gbps(double bytes_per_s) { return absl::StrCat(Fmt(bytes_per_s / 1e9, 2), " GB/s"); }

std::string Locality(bool any_inter, bool any_intra) {
  if (any_inter && any_intra) return "intra- and inter-node";
  return any_inter ? "inter-node" : "intra-node";
}

// Among the members of a slow communicator, the one whose GEMMs run
// slowest against the other members on the shapes they share (median over
// shapes of its TFLOPS / the others' median), when that is more than
// `min_drop` below: a GPU shared with other work, or a slow GPU, also slows
// the collective kernels that run on it. rank -1 when none stands out.
std::pair<int32_t, double> SlowestComputeMember(const WindowView& v,
                                                const std::set<int32_t>& members, double min_drop) {
  std::map<int32_t, std::map<std::string, double>> tflops;  // rank -> shape -> TFLOPS
  for (const analysis::RankTrace& t : v.ranks) {
    if (!members.count(t.rank)) continue;
    for (const auto& [key, g] : v.GemmsOf(t)) {
      if (g.count > 0) tflops[t.rank][key] = g.Tflops();
    }
  }
  // Per shape, every member's TFLOPS sorted: the others' median of one
  // member is this list without one copy of its value (O(1) per member and
  // shape, where collecting the others each time would be quadratic).
  std::map<std::string, std::vector<double>> by_shape;
  for (const auto& [rank, mine] : tflops) {
    for (const auto& [key, tf] : mine) by_shape[key].push_back(tf);
  }
  for (auto& [key, all] : by_shape) std::sort(all.begin(), all.end());
  auto others_median = [](const std::vector<double>& all, double mine) {
    const size_t n = all.size() - 1;  // the others
    if (n == 0) return 0.0;
    const size_t skip = static_cast<size_t>(std::lower_bound(all.begin(), all.end(), mine) -
                                            all.begin());
    auto at = [&](size_t k) { return all[k < skip ? k : k + 1]; };
    // analysis::Median: the mean of the two middle values when n is even.
    const double pos = 0.5 * static_cast<double>(n - 1);
    const size_t lo = static_cast<size_t>(pos), hi = std::min(lo + 1, n - 1);
    return at(lo) + (at(hi) - at(lo)) * (pos - static_cast<double>(lo));
  };
  std::pair<int32_t, double> worst{-1, 1.0};
  for (const auto& [rank, mine] : tflops) {
    std::vector<double> ratios;
    for (const auto& [key, tf] : mine) {
      const double ref = others_median(by_shape[key], tf);
      if (ref > 0) ratios.push_back(tf / ref);
    }
    if (ratios.empty()) continue;
    const double ratio = analysis::Median(ratios);
    if (ratio < worst.second) worst = {rank, ratio};
  }
  if (worst.first >= 0 && worst.second >= 1 - min_drop) worst.first = -1;
  return worst;
}

// The ranks that touch every slow link. With a single slow link both ends
// qualify; TFD cannot split them without another link of each, which a
// ring provides (2 links per rank).
std::vector<int32_t> TouchingEverySlowLink(const std::vector<analysis::LinkBandwidth>& links,
                                           const std::vector<size_t>& slow) {
  std::map<int32_t, int> touch;
  for (size_t i : slow) {
    touch[links[i].src]++;
    touch[links[i].dst]++;
  }
  std::vector<int32_t> members;
  for (const auto& [r, n] : touch) {
    if (n == static_cast<int>(slow.size()) && (slow.size() >= 2 || touch.size() == 2))
      members.push_back(r);
  }
  return members;
}

// The slow links for the evidence: "src->dst bandwidth (hosts)" each,
// whether they are inter- or intra-node, and the worst one's ratio to the
// median link.
struct SlowLinkFigures {
  std::vector<std::string> desc;
  bool inter = false, intra = false;
  double worst = 1;
};
SlowLinkFigures DescribeSlowLinks(const std::vector<analysis::LinkBandwidth>& links,
                                  const std::vector<size_t>& slow, double med) {
  SlowLinkFigures f;
  for (size_t i : slow) {
    const auto& l = links[i];
    (l.inter_node() ? f.inter : f.intra) = true;
    f.worst = std::min(f.worst, l.Bw() / med);
    f.desc.push_back(absl::StrCat(l.src, "->", l.dst, " ", Gbps(l.Bw()), " (",
                                  l.inter_node() ? absl::StrCat(l.src_host, " to ", l.dst_host)
                                                 : absl::StrCat("within ", l.src_host),
                                  ")"));
  }
  return f;
}

// Point-to-point links: those more than min_drop below the median link and
// beyond median - k·MAD are slow (three links at least). If one rank
// touches every slow link, that rank is the slow member; otherwise the slow
// links are reported as such.
std::optional<Diagnosis> SlowP2pLinks(const JobState& job, const WindowView& v, double min_drop,
                                      double k) {
  std::vector<analysis::LinkBandwidth> links = analysis::P2pLinks(v.ranks);
  if (links.size() < 3) return std::nullopt;
  std::vector<double> bw;
  for (const auto& l : links) bw.push_back(l.Bw());
  const double med = analysis::Median(bw);
  std::vector<size_t> slow = analysis::MadOutliers(bw, k, analysis::Tail::kLow, min_drop);
  if (slow.empty()) return std::nullopt;
  const std::vector<int32_t> members = TouchingEverySlowLink(links, slow);
  const SlowLinkFigures f = DescribeSlowLinks(links, slow, med);
  Diagnosis d = NewDiagnosis(job, "slow_link", Team::kOperations);
  d.severity = f.worst < 0.5 ? Severity::kCritical : Severity::kWarning;
  if (members.size() == 1) {
    d.ranks = members;
    d.subject = absl::StrCat("rank:", members[0]);
    d.evidence = absl::StrCat(
        "one slow ring member: rank ", members[0], " on ", v.HostOf(members[0]), " touches all ",
        slow.size(), " slow point-to-point links (", absl::StrJoin(f.desc, "; "),
        ") vs median link ", Gbps(med), " over ", links.size(), " links; ",
        Locality(f.inter, f.intra), "; links not touching it are at the median");
  } else {
    std::set<int32_t> rs;
    for (size_t i : slow) {
      rs.insert(links[i].src);
      rs.insert(links[i].dst);
    }
    d.ranks.assign(rs.begin(), rs.end());
    d.subject = absl::StrCat("links:", absl::StrJoin(d.ranks, ","));
    d.evidence = absl::StrCat(slow.size(), " slow point-to-point links without a common member (",
                              absl::StrJoin(f.desc, "; "), ") vs median link ", Gbps(med), "; ",
                              Locality(f.inter, f.intra));
  }
  d.hosts = HostsOf(v, d.ranks);
  return d;
}

// Within one class of communicators (op, size, member count): the slow ones
// are min_drop below the class median; the members common to every slow
// communicator and absent from the healthy ones are the suspects. A slow
// communicator that contains an already localized member (`reported`) is
// explained by it.
std::optional<Diagnosis> SlowClassMembers(
    const JobState& job, const WindowView& v, const std::string& cls,
    const std::vector<const analysis::CommBandwidth*>& members, double min_drop,
    const std::set<int32_t>& reported) {
  if (members.size() < 2) return std::nullopt;
  std::vector<double> bw;
  for (const auto* c : members) bw.push_back(c->BusBw());
  const double med = analysis::Median(bw);
  if (med <= 0) return std::nullopt;
  std::vector<const analysis::CommBandwidth*> slow, healthy;
  for (const auto* c : members) (c->BusBw() < (1 - min_drop) * med ? slow : healthy).push_back(c);
  if (slow.empty()) return std::nullopt;
  std::set<int32_t> common = slow[0]->ranks;
  for (const auto* c : slow) {
    std::set<int32_t> keep;
    std::set_intersection(common.begin(), common.end(), c->ranks.begin(), c->ranks.end(),
                          std::inserter(keep, keep.begin()));
    common = keep;
  }
  for (const auto* c : healthy) {
    for (int32_t r : c->ranks) common.erase(r);
  }
  bool explained = false;
  for (const auto* c : slow) {
    for (int32_t r : c->ranks) explained |= reported.count(r) > 0;
  }
  if (explained) return std::nullopt;
  std::vector<int32_t> suspects(common.begin(), common.end());
  if (suspects.empty()) return std::nullopt;
  bool inter = false;
  for (const auto* c : slow) inter |= c->hosts.size() > 1;
  Diagnosis d = NewDiagnosis(job, "slow_link", Team::kOperations);
  d.ranks = suspects;
  d.hosts = HostsOf(v, d.ranks);
  d.subject = suspects.size() == 1 ? absl::StrCat("rank:", suspects[0])
                                   : absl::StrCat("ranks:", absl::StrJoin(suspects, ","));
  d.evidence =
      absl::StrCat(slow.size(), " of ", members.size(), " communicators of class ", cls,
                   " (op/bytes/ranks) are slow: busbw ", Gbps(slow[0]->BusBw()), " vs median ",
                   Gbps(med), "; rank(s) ", absl::StrJoin(suspects, ","),
                   " are in every slow communicator and in no healthy one; ",
                   inter ? "the slow communicators span nodes" : "intra-node communicators");
  return d;
}

// What a communicator's busbw is compared with, and how far below it may
// fall: ref 0 when there is nothing to compare with yet.
struct Reference {
  double ref = 0, drop = 0;
  std::string against;  // for the evidence
};

}  // namespace

// One window's judgement, step by step; reads and updates the detector's
// baselines and streaks.
class SlowLinkDetector::WindowPass {
 public:
  WindowPass(SlowLinkDetector& d, const JobState& job, const WindowView& v)
      : d_(d), job_(job), v_(v) {}

  void Run(DiagnosisSink& sink) {
    const double min_drop = Param("slow_link.min_drop");
    // Each finding (subject) is reported once it held
    // slow_link.persist_windows consecutive windows; it localizes the
    // window's ranks at once.
    const int persist = static_cast<int>(Param("slow_link.persist_windows"));
    Streaks::Window held = d_.streaks_.Begin(job_.job());
    auto report = [&](Diagnosis d) {
      if (held.Hold(d.subject) >= persist) sink.Report(std::move(d));
    };
    std::set<int32_t> reported;  // ranks localized so far
    if (std::optional<Diagnosis> d = SlowP2pLinks(job_, v_, min_drop, Param("slow_link.mad_k"))) {
      for (int32_t r : d->ranks) reported.insert(r);
      report(std::move(*d));
    }
    const std::vector<analysis::CommBandwidth> comms = LinkCommunicators();
    std::map<std::string, std::vector<const analysis::CommBandwidth*>> classes;
    for (const auto& c : comms) classes[c.ClassKey()].push_back(&c);
    for (const auto& [cls, members] : classes) {
      std::optional<Diagnosis> d = SlowClassMembers(job_, v_, cls, members, min_drop, reported);
      if (!d) continue;
      for (int32_t r : d->ranks) reported.insert(r);
      report(std::move(*d));
    }
    const history::JobHistory* jh = d_.history_ != nullptr ? &d_.history_->Get(job_) : nullptr;
    for (const auto& c : comms) {
      if (std::optional<Diagnosis> d = AgainstReference(c, jh, reported)) report(std::move(*d));
    }
  }

 private:
  double Param(std::string_view key) const { return d_.Param(v_, key); }

  // The window's communicators with their last-arrival busbw, but for
  // collectives under slow_link.min_bytes: latency-bound, their busbw says
  // nothing of a link.
  std::vector<analysis::CommBandwidth> LinkCommunicators() const {
    std::vector<analysis::CommBandwidth> comms = v_.Communicators();
    const double min_bytes = Param("slow_link.min_bytes");
    comms.erase(std::remove_if(comms.begin(), comms.end(),
                               [&](const analysis::CommBandwidth& c) {
                                 return static_cast<double>(c.bytes) < min_bytes;
                               }),
                comms.end());
    return comms;
  }

  // The reference of a communicator, first available: the expected busbw
  // when configured, the calibrated busbw of its shape (xpu calibrate), what
  // previous runs of the job name reached on the same shape, its own first
  // windows (`b`, while `building` it has none yet).
  Reference ReferenceOf(const analysis::CommBandwidth& c, const history::JobHistory* jh,
                        const Baseline& b, bool building) const {
    const history::CollectiveShape shape{OpKindName(c.kind), c.bytes, c.nranks,
                                         static_cast<int32_t>(c.hosts.size())};
    std::string how;
    const std::optional<double> cal =
        jh != nullptr ? jh->calibration.BusBw(shape, &how) : std::nullopt;
    const history::HistoryFigure* prev = nullptr;
    if (jh != nullptr) {
      auto it = jh->baseline.busbw.find(shape);
      if (it != jh->baseline.busbw.end() &&
          it->second.runs >= static_cast<int>(Param("history.min_runs")) && it->second.value > 0) {
        prev = &it->second;
      }
    }
    Reference r;
    r.drop = Param("slow_link.min_drop");
    const double expected = Param("slow_link.expected_busbw_gbps") * 1e9;
    if (expected > 0) {
      r.ref = expected;
      r.against = absl::StrCat("expected ", Gbps(r.ref));
    } else if (cal.has_value()) {
      // A calibration runs the collective alone; in training it overlaps
      // compute, so only a larger drop is a finding.
      r.ref = *cal;
      r.drop = Param("slow_link.calibrated_min_drop");
      r.against = absl::StrCat("calibrated ", Gbps(r.ref), " (", how, ")");
    } else if (prev != nullptr) {
      r.ref = prev->value;
      r.against = absl::StrCat(Gbps(r.ref), ", median of ", jh->baseline.Describe(prev->runs));
    } else if (!building) {
      r.ref = b.busbw;
      r.against = absl::StrCat("its baseline ", Gbps(r.ref));
    }
    return r;
  }

  // A communicator below its reference while no member was singled out
  // above: a slow ring/communicator. Its first windows (history.
  // baseline_windows) form its own baseline.
  std::optional<Diagnosis> AgainstReference(const analysis::CommBandwidth& c,
                                            const history::JobHistory* jh,
                                            const std::set<int32_t>& reported) {
    Baseline& b = d_.baseline_[job_.job()][absl::StrCat(c.comm_id, "/", c.kind, "/", c.bytes)];
    const double bw = c.BusBw();
    const bool building = b.windows < static_cast<int>(Param("history.baseline_windows"));
    if (building) {
      b.busbw = std::max(b.busbw, bw);
      b.windows++;
    }
    const Reference r = ReferenceOf(c, jh, b, building);
    if (r.ref <= 0 || bw >= (1 - r.drop) * r.ref) return std::nullopt;
    // A member singled out above (a slow link or member) slows every
    // communicator it is in: that one finding explains them.
    for (int32_t rank : c.ranks) {
      if (reported.count(rank)) return std::nullopt;
    }
    Diagnosis d = NewDiagnosis(job_, "slow_link", Team::kOperations);
    d.ranks.assign(c.ranks.begin(), c.ranks.end());
    d.hosts.assign(c.hosts.begin(), c.hosts.end());
    d.subject = absl::StrCat("comm:", c.comm_id);
    d.severity = bw < 0.5 * r.ref ? Severity::kCritical : Severity::kWarning;
    d.evidence =
        absl::StrCat("slow ring: communicator ", c.comm_id, " (", c.ranks.size(), " ranks, ",
                     c.hosts.size() > 1 ? "inter-node" : "intra-node", ") ", OpKindName(c.kind),
                     " of ", c.bytes, " bytes at busbw ", Gbps(bw), " (last-arrival, ", c.count,
                     " collectives) vs ", r.against, "; no single member can be singled out");
    const auto [slow_member, ratio] = SlowestComputeMember(
        v_, std::set<int32_t>(c.ranks.begin(), c.ranks.end()), Param("slow_gpu.min_drop"));
    if (slow_member >= 0) {
      absl::StrAppend(&d.evidence, "; but rank ", slow_member, "'s GEMMs run at ", Fmt(ratio),
                      "x the other members' on the same shapes: a GPU shared with other work (or a "
                      "slow GPU, see "
                      "slow_gpu) may be slowing the collective kernels on it too");
    }
    return d;
  }

  SlowLinkDetector& d_;
  const JobState& job_;
  const WindowView& v_;
};

void SlowLinkDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty()) return;
  WindowPass(*this, job, v).Run(sink);
}

}  // namespace xpu::engine
