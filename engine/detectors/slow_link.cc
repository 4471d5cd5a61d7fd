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
    for (const auto& [key, g] : analysis::GemmTflops(t)) {
      if (g.count > 0) tflops[t.rank][key] = g.Tflops();
    }
  }
  std::pair<int32_t, double> worst{-1, 1.0};
  for (const auto& [rank, mine] : tflops) {
    std::vector<double> ratios;
    for (const auto& [key, tf] : mine) {
      std::vector<double> others;
      for (const auto& [r2, theirs] : tflops) {
        auto it = theirs.find(key);
        if (r2 != rank && it != theirs.end()) others.push_back(it->second);
      }
      const double ref = others.empty() ? 0 : analysis::Median(others);
      if (ref > 0) ratios.push_back(tf / ref);
    }
    if (ratios.empty()) continue;
    const double ratio = analysis::Median(ratios);
    if (ratio < worst.second) worst = {rank, ratio};
  }
  if (worst.first >= 0 && worst.second >= 1 - min_drop) worst.first = -1;
  return worst;
}

}  // namespace

void SlowLinkDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  const WindowView& v = views_->Get(job);
  if (v.ranks.empty()) return;
  const double min_drop = Param(v, "slow_link.min_drop");
  const double k = Param(v, "slow_link.mad_k");
  const double expected = Param(v, "slow_link.expected_busbw_gbps") * 1e9;
  const int baseline_windows = static_cast<int>(Param(v, "history.baseline_windows"));
  std::set<int32_t> reported;
  // Each finding (subject) is reported once it held slow_link.persist_windows
  // consecutive windows; it localizes the window's ranks at once.
  const int persist = static_cast<int>(Param(v, "slow_link.persist_windows"));
  Streaks::Window held = streaks_.Begin(job.job());
  auto report = [&](Diagnosis d) {
    if (held.Hold(d.subject) >= persist) sink.Report(std::move(d));
  };

  // --- point-to-point links
  std::vector<analysis::LinkBandwidth> links = analysis::P2pLinks(v.ranks);
  if (links.size() >= 3) {
    std::vector<double> bw;
    for (const auto& l : links) bw.push_back(l.Bw());
    const double med = analysis::Median(bw);
    std::vector<size_t> slow = analysis::MadOutliers(bw, k, analysis::Tail::kLow, min_drop);
    if (!slow.empty()) {
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
      // With a single slow link both ends qualify; TFD cannot split them
      // without another link of each, which a ring provides (2 links per rank).
      bool inter = false, intra = false;
      std::vector<std::string> desc;
      double worst = 1;
      for (size_t i : slow) {
        const auto& l = links[i];
        (l.inter_node() ? inter : intra) = true;
        worst = std::min(worst, l.Bw() / med);
        desc.push_back(absl::StrCat(l.src, "->", l.dst, " ", Gbps(l.Bw()), " (",
                                    l.inter_node() ? absl::StrCat(l.src_host, " to ", l.dst_host)
                                                   : absl::StrCat("within ", l.src_host),
                                    ")"));
      }
      Diagnosis d = NewDiagnosis(job, "slow_link", Team::kOperations);
      d.severity = worst < 0.5 ? Severity::kCritical : Severity::kWarning;
      if (members.size() == 1) {
        d.ranks = members;
        d.subject = absl::StrCat("rank:", members[0]);
        d.evidence = absl::StrCat(
            "one slow ring member: rank ", members[0], " on ", v.HostOf(members[0]),
            " touches all ", slow.size(), " slow point-to-point links (", absl::StrJoin(desc, "; "),
            ") vs median link ", Gbps(med), " over ", links.size(), " links; ",
            Locality(inter, intra), "; links not touching it are at the median");
      } else {
        std::set<int32_t> rs;
        for (size_t i : slow) {
          rs.insert(links[i].src);
          rs.insert(links[i].dst);
        }
        d.ranks.assign(rs.begin(), rs.end());
        d.subject = absl::StrCat("links:", absl::StrJoin(d.ranks, ","));
        d.evidence =
            absl::StrCat(slow.size(), " slow point-to-point links without a common member (",
                         absl::StrJoin(desc, "; "), ") vs median link ", Gbps(med), "; ",
                         Locality(inter, intra));
      }
      d.hosts = HostsOf(v, d.ranks);
      for (int32_t r : d.ranks) reported.insert(r);
      report(std::move(d));
    }
  }

  // --- communicators of one class
  std::vector<analysis::CommBandwidth> comms = analysis::CommunicatorBandwidth(v.ranks);
  // Small collectives are latency-bound: their busbw says nothing of a link.
  const double min_bytes = Param(v, "slow_link.min_bytes");
  comms.erase(std::remove_if(comms.begin(), comms.end(),
                             [&](const analysis::CommBandwidth& c) {
                               return static_cast<double>(c.bytes) < min_bytes;
                             }),
              comms.end());
  std::map<std::string, std::vector<const analysis::CommBandwidth*>> classes;
  for (const auto& c : comms) classes[c.ClassKey()].push_back(&c);
  for (const auto& [cls, members] : classes) {
    if (members.size() < 2) continue;
    std::vector<double> bw;
    for (const auto* c : members) bw.push_back(c->BusBw());
    const double med = analysis::Median(bw);
    if (med <= 0) continue;
    std::vector<const analysis::CommBandwidth*> slow, healthy;
    for (const auto* c : members) (c->BusBw() < (1 - min_drop) * med ? slow : healthy).push_back(c);
    if (slow.empty()) continue;
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
    // A slow communicator that contains an already localized member is
    // explained by it.
    bool explained = false;
    for (const auto* c : slow) {
      for (int32_t r : c->ranks) explained |= reported.count(r) > 0;
    }
    if (explained) continue;
    std::vector<int32_t> suspects(common.begin(), common.end());
    if (suspects.empty()) continue;
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
    for (int32_t r : suspects) reported.insert(r);
    report(std::move(d));
  }

  // --- each communicator against a reference: the expected busbw when
  // configured, else the calibrated busbw of its shape (xpu calibrate), else
  // what previous runs of the job name reached on the same shape, else its
  // own first windows.
  const history::JobHistory* jh = history_ != nullptr ? &history_->Get(job) : nullptr;
  const int min_runs = static_cast<int>(Param(v, "history.min_runs"));
  const double calibrated_min_drop = Param(v, "slow_link.calibrated_min_drop");
  std::map<std::string, Baseline>& base = baseline_[job.job()];
  for (const auto& c : comms) {
    const std::string key = absl::StrCat(c.comm_id, "/", c.kind, "/", c.bytes);
    Baseline& b = base[key];
    const double bw = c.BusBw();
    const bool building = b.windows < baseline_windows;
    if (building) {
      b.busbw = std::max(b.busbw, bw);
      b.windows++;
    }
    const history::CollectiveShape shape{OpKindName(c.kind), c.bytes, c.nranks,
                                         static_cast<int32_t>(c.hosts.size())};
    std::string how;
    const std::optional<double> cal =
        jh != nullptr ? jh->calibration.BusBw(shape, &how) : std::nullopt;
    const history::HistoryFigure* prev = nullptr;
    if (jh != nullptr) {
      auto it = jh->baseline.busbw.find(shape);
      if (it != jh->baseline.busbw.end() && it->second.runs >= min_runs && it->second.value > 0) {
        prev = &it->second;
      }
    }
    double ref = 0, drop = min_drop;
    std::string against;
    if (expected > 0) {
      ref = expected;
      against = absl::StrCat("expected ", Gbps(ref));
    } else if (cal.has_value()) {
      // A calibration runs the collective alone; in training it overlaps
      // compute, so only a larger drop is a finding.
      ref = *cal;
      drop = calibrated_min_drop;
      against = absl::StrCat("calibrated ", Gbps(ref), " (", how, ")");
    } else if (prev != nullptr) {
      ref = prev->value;
      against = absl::StrCat(Gbps(ref), ", median of ", jh->baseline.Describe(prev->runs));
    } else if (!building) {
      ref = b.busbw;
      against = absl::StrCat("its baseline ", Gbps(ref));
    }
    if (ref <= 0 || bw >= (1 - drop) * ref) continue;
    bool any_new = false;
    for (int32_t r : c.ranks) any_new |= !reported.count(r);
    if (!any_new) continue;  // already localized above
    Diagnosis d = NewDiagnosis(job, "slow_link", Team::kOperations);
    d.ranks.assign(c.ranks.begin(), c.ranks.end());
    d.hosts.assign(c.hosts.begin(), c.hosts.end());
    d.subject = absl::StrCat("comm:", c.comm_id);
    d.severity = bw < 0.5 * ref ? Severity::kCritical : Severity::kWarning;
    d.evidence =
        absl::StrCat("slow ring: communicator ", c.comm_id, " (", c.ranks.size(), " ranks, ",
                     c.hosts.size() > 1 ? "inter-node" : "intra-node", ") ", OpKindName(c.kind),
                     " of ", c.bytes, " bytes at busbw ", Gbps(bw), " (last-arrival, ", c.count,
                     " collectives) vs ", against, "; no single member can be singled out");
    const auto [slow_member, ratio] = SlowestComputeMember(
        v, std::set<int32_t>(c.ranks.begin(), c.ranks.end()), Param(v, "slow_gpu.min_drop"));
    if (slow_member >= 0) {
      absl::StrAppend(&d.evidence, "; but rank ", slow_member, "'s GEMMs run at ", Fmt(ratio),
                      "x the other members' on the same shapes: a GPU shared with other work (or a "
                      "slow GPU, see "
                      "slow_gpu) may be slowing the collective kernels on it too");
    }
    report(std::move(d));
  }
}

}  // namespace xpu::engine
