// engine/profile/profile_report.cc — see profile_report.h.
#include "engine/profile/profile_report.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/alerting/json_text.h"

namespace xpu::engine::profile {
namespace {

std::string Num(double v, int digits = 4) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

const char* Bool(bool b) { return b ? "true" : "false"; }

std::string PatternJson(const analysis::Pattern& p) {
  return absl::StrCat("\"beta\":", Num(p.beta, 6), ",\"mu\":", Num(p.mu, 6),
                      ",\"sigma\":", Num(p.sigma, 6));
}

std::string DiagnosisJson(const Diagnosis& d) {
  std::vector<std::string> hosts;
  for (const std::string& h : d.hosts) hosts.push_back(JsonQuote(h));
  return absl::StrCat("{\"kind\":", JsonQuote(d.kind), ",\"subject\":", JsonQuote(d.subject),
                      ",\"team\":", JsonQuote(TeamName(d.team)),
                      ",\"severity\":", JsonQuote(SeverityName(d.severity)), ",\"ranks\":[",
                      absl::StrJoin(d.ranks, ","), "],\"hosts\":[", absl::StrJoin(hosts, ","),
                      "],\"evidence\":", JsonQuote(d.evidence), "}");
}

}  // namespace

std::string DisplayName(const std::string& name, size_t max) {
  std::string out = name;
  if (name.size() > 2 && name[0] == '_' && name[1] == 'Z') {
    int status = 0;
    std::unique_ptr<char, decltype(&free)> d(
        abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &free);
    if (status == 0 && d != nullptr) out = d.get();
  }
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

size_t ProfileReport::ranks_profiled() const {
  return static_cast<size_t>(std::count_if(
      ranks.begin(), ranks.end(), [](const ProfileRank& r) { return r.status == "done"; }));
}

std::string ProfileReport::SkippedReason() const {
  std::map<std::string, size_t> reasons;
  for (const ProfileRank& r : ranks) {
    if (r.status == "done") continue;
    if (r.status == "skipped_other_client") {
      ++reasons["skipped: another CUPTI client is active"];
    } else {
      ++reasons[r.reason.empty() ? r.status : r.reason];
    }
  }
  std::string best;
  size_t n = 0;
  for (const auto& [reason, count] : reasons) {
    if (count > n) {
      best = reason;
      n = count;
    }
  }
  return best;
}

std::string ProfileReport::Json() const {
  std::string o = "{";
  o += "\"job\":" + JsonQuote(job);
  o += ",\"trigger\":" + JsonQuote(trigger);
  o += ",\"requested_ns\":" + std::to_string(requested_ns);
  o += ",\"finished_ns\":" + std::to_string(finished_ns);
  o += ",\"window_ms\":" + std::to_string(window_ms);
  o += ",\"daemons_asked\":" + std::to_string(daemons_asked);
  o += ",\"daemons_answered\":" + std::to_string(daemons_answered);
  o += ",\"ranks_profiled\":" + std::to_string(ranks_profiled());
  o += ",\"ranks_skipped\":" + std::to_string(ranks.size() - ranks_profiled());
  o += ",\"skipped_reason\":" + JsonQuote(SkippedReason());
  o += ",\"ranks\":[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const ProfileRank& r = ranks[i];
    o += absl::StrCat(
        i ? "," : "", "{\"rank\":", r.rank, ",\"host\":", JsonQuote(r.host), ",\"pid\":", r.pid,
        ",\"status\":", JsonQuote(r.status), ",\"reason\":", JsonQuote(r.reason),
        ",\"window_start_ns\":", r.window_start_ns, ",\"window_end_ns\":", r.window_end_ns,
        ",\"t_ms\":", Fixed(r.t_ns * 1e-6, 3), ",\"iterations\":", r.iterations,
        ",\"step_source\":", JsonQuote(r.step_source), ",\"kernel_records\":", r.kernel_records,
        ",\"kernels_dropped\":", r.kernels_dropped,
        ",\"cupti_finalized\":", Bool(r.cupti_finalized), ",\"functions\":", r.functions, "}");
  }
  o += "],\"functions\":[";
  for (size_t i = 0; i < functions.size(); ++i) {
    const FunctionRow& f = functions[i];
    o += absl::StrCat(i ? "," : "", "{\"name\":", JsonQuote(DisplayName(f.name, 400)),
                      ",\"class\":", JsonQuote(analysis::FunctionClassName(f.cls)),
                      ",\"reference_us\":", Fixed(f.reference_ns * 1e-3, 3),
                      ",\"beta_median\":", Num(f.beta_median, 6),
                      ",\"mu_median\":", Num(f.mu_median, 6), ",\"M\":", Num(f.M, 6),
                      ",\"MAD\":", Num(f.MAD, 6), ",\"ranks\":[");
    for (size_t j = 0; j < f.ranks.size(); ++j) {
      o += absl::StrCat(j ? "," : "", "{\"rank\":", f.ranks[j], ",", PatternJson(f.patterns[j]),
                        ",\"D\":", Num(f.D[j], 6), ",\"Delta\":", Num(f.Delta[j], 6), "}");
    }
    o += "]}";
  }
  o += "],\"findings\":[";
  for (size_t i = 0; i < findings.size(); ++i) {
    const ProfileFinding& f = findings[i];
    o += absl::StrCat(
        i ? "," : "", "{\"function\":", JsonQuote(DisplayName(f.function, 400)),
        ",\"class\":", JsonQuote(analysis::FunctionClassName(f.cls)), ",\"rank\":", f.rank,
        ",\"host\":", JsonQuote(f.host), ",", PatternJson(f.pattern), ",\"D\":", Num(f.D, 6),
        ",\"Delta\":", Num(f.Delta, 6), ",\"M\":", Num(f.M, 6), ",\"MAD\":", Num(f.MAD, 6),
        ",\"beta_median\":", Num(f.beta_median, 6), ",\"mu_median\":", Num(f.mu_median, 6),
        ",\"by_expectation\":", Bool(f.by_expectation),
        ",\"by_difference\":", Bool(f.by_difference), ",\"more_time\":", Bool(f.more_time),
        ",\"slower\":", Bool(f.slower), ",\"cause\":", Bool(f.cause()), "}");
  }
  o += "],\"diagnoses\":[";
  for (size_t i = 0; i < diagnoses.size(); ++i) o += (i ? "," : "") + DiagnosisJson(diagnoses[i]);
  o += "]}";
  return o;
}

std::string ProfileReport::Text() const {
  std::string o = absl::StrCat("profiling window of job ", job, " (",
                               trigger == "on_demand" ? "on demand" : "after a " + trigger,
                               "): ", Fixed(window_ms / 1000.0, 1), " s, ", ranks_profiled(), "/",
                               ranks.size(), " ranks profiled, ", daemons_answered, "/",
                               daemons_asked, " daemons answered\n");
  if (ranks_profiled() < ranks.size()) {
    o += absl::StrCat("  not profiled: ", ranks.size() - ranks_profiled(),
                      " ranks: ", SkippedReason(), "\n");
  }
  o += "ranks:\n";
  for (const ProfileRank& r : ranks) {
    o += absl::StrCat("  rank ", r.rank, " ", r.host, " pid ", r.pid, ": ", r.status);
    if (r.status == "done") {
      o += absl::StrCat(
          ", T ", Fixed(r.t_ns * 1e-9, 2), " s",
          r.iterations > 0 ? absl::StrCat(" (", r.iterations, " iterations, ", r.step_source, ")")
                           : "",
          ", ", r.kernel_records, " kernels",
          r.kernels_dropped ? absl::StrCat(" (", r.kernels_dropped, " dropped)") : "", ", ",
          r.functions, " functions, CUPTI ", r.cupti_finalized ? "released" : "NOT finalized");
    } else if (!r.reason.empty()) {
      o += ": " + r.reason;
    }
    o += "\n";
  }
  if (ranks_profiled() == 0) return o;
  o += "abnormal function executions (beta > min and (D > 0 or Delta > M + k MAD)):\n";
  if (findings.empty()) o += "  none\n";
  for (const ProfileFinding& f : findings) {
    o += absl::StrCat("  rank ", f.rank, ": ", DisplayName(f.function, 100), " (",
                      analysis::FunctionClassName(f.cls), ") beta ", Fixed(f.pattern.beta, 3),
                      " (median ", Fixed(f.beta_median, 3), ") mu ", Fixed(f.pattern.mu, 2),
                      " (median ", Fixed(f.mu_median, 2), ")");
    if (f.by_difference)
      o += absl::StrCat(" Delta ", Fixed(f.Delta, 3), " > M ", Fixed(f.M, 3), " + k MAD ",
                        Fixed(f.MAD, 3));
    if (f.by_expectation) o += absl::StrCat(" D ", Fixed(f.D, 3), " (outside its expected range)");
    o += f.cause() ? "  <- slow here\n"
                   : (f.by_difference ? "  (unique, but not slower than the others: not a cause)\n"
                                      : "\n");
  }
  if (!diagnoses.empty()) o += "diagnoses:\n";
  for (const Diagnosis& d : diagnoses) {
    o += absl::StrCat("  ", d.kind, " [", std::string(TeamName(d.team)), ", ",
                      std::string(SeverityName(d.severity)), "] ", d.subject, "\n    ", d.evidence,
                      "\n");
  }
  o += "functions on the critical path (median over ranks):\n";
  const size_t top = std::min<size_t>(functions.size(), 12);
  for (size_t i = 0; i < top; ++i) {
    const FunctionRow& f = functions[i];
    o += absl::StrCat("  ", Fixed(f.beta_median, 3), "  ", analysis::FunctionClassName(f.cls), "  ",
                      DisplayName(f.name, 100), "  mu ", Fixed(f.mu_median, 2), "  r_f ",
                      Fixed(f.reference_ns * 1e-3, 1), " us\n");
  }
  return o;
}

}  // namespace xpu::engine::profile
