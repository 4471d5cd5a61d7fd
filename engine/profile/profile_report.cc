// engine/profile/profile_report.cc — see profile_report.h.
#include "engine/profile/profile_report.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/json/json.h"

namespace xpu::engine::profile {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// Report figures keep six significant digits (they are estimates).
double Sig6(double v) { return json::Significant(v, 6); }

json::Json PatternJson(const analysis::Pattern& p) {
  return {{"beta", Sig6(p.beta)}, {"mu", Sig6(p.mu)}, {"sigma", Sig6(p.sigma)}};
}

json::Json DiagnosisJson(const Diagnosis& d) {
  return {{"kind", d.kind},           {"subject", d.subject},
          {"team", TeamName(d.team)}, {"severity", SeverityName(d.severity)},
          {"ranks", d.ranks},         {"hosts", d.hosts},
          {"evidence", d.evidence}};
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
  json::Json rank_list = json::Json::array();
  for (const ProfileRank& r : ranks) {
    rank_list.push_back({{"rank", r.rank},
                         {"host", r.host},
                         {"pid", r.pid},
                         {"status", r.status},
                         {"reason", r.reason},
                         {"window_start_ns", r.window_start_ns},
                         {"window_end_ns", r.window_end_ns},
                         {"t_ms", json::Fixed(r.t_ns * 1e-6, 3)},
                         {"iterations", r.iterations},
                         {"step_source", r.step_source},
                         {"kernel_records", r.kernel_records},
                         {"kernels_dropped", r.kernels_dropped},
                         {"cupti_finalized", r.cupti_finalized},
                         {"functions", r.functions}});
  }
  json::Json function_list = json::Json::array();
  for (const FunctionRow& f : functions) {
    json::Json per_rank = json::Json::array();
    for (size_t j = 0; j < f.ranks.size(); ++j) {
      json::Json row = {{"rank", f.ranks[j]}};
      row.update(PatternJson(f.patterns[j]));
      row["D"] = Sig6(f.D[j]);
      row["Delta"] = Sig6(f.Delta[j]);
      per_rank.push_back(std::move(row));
    }
    function_list.push_back({{"name", DisplayName(f.name, 400)},
                             {"class", analysis::FunctionClassName(f.cls)},
                             {"reference_us", json::Fixed(f.reference_ns * 1e-3, 3)},
                             {"beta_median", Sig6(f.beta_median)},
                             {"mu_median", Sig6(f.mu_median)},
                             {"M", Sig6(f.M)},
                             {"MAD", Sig6(f.MAD)},
                             {"ranks", std::move(per_rank)}});
  }
  json::Json finding_list = json::Json::array();
  for (const ProfileFinding& f : findings) {
    json::Json row = {{"function", DisplayName(f.function, 400)},
                      {"class", analysis::FunctionClassName(f.cls)},
                      {"rank", f.rank},
                      {"host", f.host}};
    row.update(PatternJson(f.pattern));
    row.update(json::Json{{"D", Sig6(f.D)},
                          {"Delta", Sig6(f.Delta)},
                          {"M", Sig6(f.M)},
                          {"MAD", Sig6(f.MAD)},
                          {"beta_median", Sig6(f.beta_median)},
                          {"mu_median", Sig6(f.mu_median)},
                          {"by_expectation", f.by_expectation},
                          {"by_difference", f.by_difference},
                          {"more_time", f.more_time},
                          {"slower", f.slower},
                          {"cause", f.cause()}});
    finding_list.push_back(std::move(row));
  }
  json::Json diagnosis_list = json::Json::array();
  for (const Diagnosis& d : diagnoses) diagnosis_list.push_back(DiagnosisJson(d));
  const json::Json o = {{"job", job},
                        {"trigger", trigger},
                        {"requested_ns", requested_ns},
                        {"finished_ns", finished_ns},
                        {"window_ms", window_ms},
                        {"daemons_asked", daemons_asked},
                        {"daemons_answered", daemons_answered},
                        {"ranks_profiled", ranks_profiled()},
                        {"ranks_skipped", ranks.size() - ranks_profiled()},
                        {"skipped_reason", SkippedReason()},
                        {"ranks", std::move(rank_list)},
                        {"functions", std::move(function_list)},
                        {"findings", std::move(finding_list)},
                        {"diagnoses", std::move(diagnosis_list)}};
  return json::Dump(o);
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
