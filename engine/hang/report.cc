// engine/hang/report.cc — see report.h.
#include "engine/hang/report.h"

#include <cstdio>

namespace xpu::engine::hang {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

std::string IntList(const std::vector<int32_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string StrList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + JsonString(v[i]);
  return out + "]";
}

double Seconds(uint64_t from, uint64_t to) {
  return from != 0 && to > from ? (to - from) * 1e-9 : 0;
}

}  // namespace

std::string HangReport::Json() const {
  std::string o = "{";
  o += "\"job\":" + JsonString(job);
  o += ",\"on_demand\":" + std::string(on_demand ? "true" : "false");
  o += ",\"classification\":" + JsonString(HangClassName(verdict.cls));
  o += ",\"team\":" + JsonString(verdict.team);
  o += ",\"culprits\":" + IntList(verdict.culprits);
  o += ",\"culprit_ranks\":" + JsonString(CompressRanks(verdict.culprits));
  o += ",\"hosts\":" + StrList(verdict.hosts);
  o += ",\"reason\":" + JsonString(verdict.reason);
  o += ",\"details\":" + StrList(verdict.details);
  o += ",\"faulty_link\":" + JsonString(verdict.faulty_link);
  o += ",\"ring_named\":" + IntList(verdict.ring_named);
  o += ",\"comm_id\":" + std::to_string(verdict.comm_id);
  o += ",\"stuck_seq\":" + std::to_string(verdict.stuck_seq);
  o += ",\"trigger\":" + JsonString(trigger);
  o += ",\"stall_since_ns\":" + std::to_string(stall_since_ns);
  o += ",\"suspected_ns\":" + std::to_string(suspected_ns);
  o += ",\"diagnosed_ns\":" + std::to_string(diagnosed_ns);
  char buf[64];
  snprintf(buf, sizeof(buf), "%.3f", Seconds(stall_since_ns, diagnosed_ns));
  o += ",\"stall_to_diagnosis_s\":" + std::string(buf);
  o += ",\"evidence_ms\":" + std::to_string(evidence_ms);
  o += ",\"daemons_asked\":" + std::to_string(daemons_asked);
  o += ",\"daemons_answered\":" + std::to_string(daemons_answered);
  o += ",\"ranks\":[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankSummary& r = ranks[i];
    o += (i ? "," : "") + std::string("{\"rank\":") + std::to_string(r.rank) +
         ",\"host\":" + JsonString(r.host) + ",\"pid\":" + std::to_string(r.pid) +
         ",\"state\":" + JsonString(r.proc_state) +
         ",\"answered\":" + (r.answered ? "true" : "false") + ",\"where\":" + JsonString(r.where) +
         ",\"comms\":" + JsonString(r.comms) + ",\"open\":" + JsonString(r.open) +
         ",\"kernel\":" + JsonString(r.kernel) + ",\"native_error\":" + JsonString(r.native_error) +
         ",\"python_error\":" + JsonString(r.python_error) +
         ",\"gpu_health\":" + JsonString(r.gpu_health) +
         ",\"collect_ms\":" + std::to_string(r.collect_ms) + "}";
  }
  o += "],\"merged_stacks\":" + JsonString(tree.Text());
  return o + "}";
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
    char buf[160];
    snprintf(buf, sizeof(buf),
             "  timing:         stall -> diagnosis %.1f s (evidence %llu ms, %u/%u daemons)\n",
             Seconds(stall_since_ns, diagnosed_ns), static_cast<unsigned long long>(evidence_ms),
             daemons_answered, daemons_asked);
    o += buf;
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
    if (!r.native_error.empty()) o += "      native stacks: " + r.native_error + "\n";
    if (!r.python_error.empty()) o += "      python stacks: " + r.python_error + "\n";
  }
  o += "\nMerged stacks (frame [ranks in | ranks not in]):\n" + tree.Text();
  return o;
}

}  // namespace xpu::engine::hang
