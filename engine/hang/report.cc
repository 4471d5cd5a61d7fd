// engine/hang/report.cc — see report.h.
#include "engine/hang/report.h"

#include <cstdio>

#include "common/json/json.h"

namespace xpu::engine::hang {

namespace {

double Seconds(uint64_t from, uint64_t to) {
  return from != 0 && to > from ? (to - from) * 1e-9 : 0;
}

}  // namespace

std::string HangReport::Json() const {
  json::Json rank_list = json::Json::array();
  for (const RankSummary& r : ranks) {
    rank_list.push_back({{"rank", r.rank},
                         {"host", r.host},
                         {"pid", r.pid},
                         {"state", r.proc_state},
                         {"answered", r.answered},
                         {"where", r.where},
                         {"comms", r.comms},
                         {"open", r.open},
                         {"kernel", r.kernel},
                         {"native_error", r.native_error},
                         {"python_error", r.python_error},
                         {"gpu_health", r.gpu_health},
                         {"collect_ms", r.collect_ms},
                         {"overdue", r.overdue},
                         {"threads", r.threads},
                         {"cpu_busy", json::Fixed(r.cpu_busy, 2)},
                         {"progress_age_ms", r.progress_age_ms}});
  }
  const json::Json o = {
      {"job", job},
      {"on_demand", on_demand},
      {"classification", HangClassName(verdict.cls)},
      {"team", verdict.team},
      {"culprits", verdict.culprits},
      {"culprit_ranks", CompressRanks(verdict.culprits)},
      {"hosts", verdict.hosts},
      {"reason", verdict.reason},
      {"details", verdict.details},
      {"faulty_link", verdict.faulty_link},
      {"ring_named", verdict.ring_named},
      {"comm_id", verdict.comm_id},
      {"stuck_seq", verdict.stuck_seq},
      {"trigger", trigger},
      {"stall_since_ns", stall_since_ns},
      {"suspected_ns", suspected_ns},
      {"diagnosed_ns", diagnosed_ns},
      {"refined_ns", refined_ns},
      {"phase", phase},
      {"first_verdict", first_verdict},
      {"threshold_ns", threshold_ns},
      {"stall_to_suspected_s", json::Fixed(Seconds(stall_since_ns, suspected_ns), 3)},
      {"stall_to_diagnosis_s", json::Fixed(Seconds(stall_since_ns, diagnosed_ns), 3)},
      {"stall_to_refined_s", json::Fixed(Seconds(stall_since_ns, refined_ns), 3)},
      {"evidence_ms", evidence_ms},
      {"daemons_asked", daemons_asked},
      {"daemons_answered", daemons_answered},
      {"ranks", std::move(rank_list)},
      {"merged_stacks", tree.Text()}};
  return json::Dump(o);
}

std::string HangReport::Text() const {
  std::string o;
  o += (on_demand ? "Merged stacks of job " : "Hang diagnosis of job ") + job + "\n";
  if (!on_demand) {
    o += "  classification: " + std::string(HangClassName(verdict.cls)) + "\n";
    o += "  culprit ranks:  " + CompressRanks(verdict.culprits);
    if (!verdict.hosts.empty()) {
      o += " on";
      for (const std::string& h : verdict.hosts) o += " " + h;
    }
    o += "\n  team:           " +
         (verdict.team.empty() ? std::string("none (not a fault)") : verdict.team) + "\n";
    o += "  reason:         " + verdict.reason + "\n";
    if (!verdict.faulty_link.empty()) {
      o += "  faulty link:    " + verdict.faulty_link +
           " (intra-kernel ring progress names rank(s) " + CompressRanks(verdict.ring_named) +
           ")\n";
    }
    o += "  trigger:        " + trigger + "\n";
    char refined[64] = "refinement pending";
    if (refined_ns != 0) {
      snprintf(refined, sizeof(refined), "refined %.1f s", Seconds(stall_since_ns, refined_ns));
    }
    char buf[256];
    snprintf(buf, sizeof(buf),
             "  timing:         stall -> suspected %.1f s, -> first verdict %.1f s, -> %s "
             "(evidence %llu ms, %u/%u daemons)\n",
             Seconds(stall_since_ns, suspected_ns), Seconds(stall_since_ns, diagnosed_ns),
             refined, static_cast<unsigned long long>(evidence_ms), daemons_answered,
             daemons_asked);
    o += buf;
    if (!first_verdict.empty()) o += "  first verdict:  " + first_verdict + "\n";
    for (const std::string& d : verdict.details) o += "    - " + d + "\n";
  }
  o += "\nRanks:\n";
  for (const RankSummary& r : ranks) {
    o += "  rank " + std::to_string(r.rank) + " " + r.host + " pid " + std::to_string(r.pid) + " " +
         r.proc_state + (r.answered ? "" : " (no evidence)") + "\n";
    if (!r.where.empty()) o += "      at: " + r.where + "\n";
    if (!r.comms.empty()) o += "      " + r.comms + "\n";
    if (!r.open.empty()) o += "      open: " + r.open + "\n";
    if (!r.kernel.empty()) o += "      kernel: " + r.kernel + "\n";
    if (!r.overdue.empty()) o += "      overdue: " + r.overdue + "\n";
    if (!r.threads.empty()) {
      const std::string main = r.threads.substr(0, r.threads.find('\n'));
      char cpu[48] = "";
      if (r.cpu_busy >= 0) snprintf(cpu, sizeof(cpu), ", %.2f CPU", r.cpu_busy);
      o += "      main thread: " + main + cpu + "\n";
    }
    if (!r.native_error.empty()) o += "      native stacks: " + r.native_error + "\n";
    if (!r.python_error.empty()) o += "      python stacks: " + r.python_error + "\n";
  }
  o += "\nMerged stacks (frame [ranks in | ranks not in]):\n" + tree.Text();
  return o;
}

}  // namespace xpu::engine::hang
