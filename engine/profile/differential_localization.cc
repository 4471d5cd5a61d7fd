#include "engine/profile/differential_localization.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/profile/profile_monitor.h"

namespace xpu::engine::profile {
namespace {

using analysis::FunctionClass;
using profile::DisplayName;
using profile::ProfileFinding;

std::string Fixed(double v, int decimals) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

const char* Noun(FunctionClass c) {
  switch (c) {
    case FunctionClass::kGpuCompute:
      return "GPU kernel";
    case FunctionClass::kMemory:
      return "memory operation";
    case FunctionClass::kCollective:
      return "collective kernel";
    case FunctionClass::kPython:
      return "Python function";
  }
  return "function";
}

Team DifferentialTeam(FunctionClass c) {
  return c == FunctionClass::kPython ? Team::kAlgorithm : Team::kOperations;
}

const char* DifferentialMeaning(FunctionClass c) {
  switch (c) {
    case FunctionClass::kGpuCompute:
    case FunctionClass::kMemory:
      return "The same work is slower on these GPUs: check their hardware (clocks, thermals, a "
             "faulty device)";
    case FunctionClass::kCollective:
      return "Communication is slower on these ranks: check their links and NICs";
    case FunctionClass::kPython:
      return "These ranks spend more of the step in Python: uneven work, data loading, garbage "
             "collection";
  }
  return "";
}

std::string Subject(const std::string& function) {
  return "function:" + DisplayName(function, 120);
}

void AddRankAndHost(const ProfileFinding& f, Diagnosis* d) {
  if (std::find(d->ranks.begin(), d->ranks.end(), f.rank) == d->ranks.end())
    d->ranks.push_back(f.rank);
  if (!f.host.empty() && std::find(d->hosts.begin(), d->hosts.end(), f.host) == d->hosts.end()) {
    d->hosts.push_back(f.host);
  }
}

}  // namespace

std::vector<Diagnosis> DiagnoseProfile(const profile::ProfileReport& report) {
  std::vector<Diagnosis> out;
  const size_t profiled = report.ranks_profiled();
  // Consequences: unique only by spending less time, listed with the causes.
  std::vector<const ProfileFinding*> consequences;
  std::map<std::string, std::vector<const ProfileFinding*>> causes, unexpected;
  for (const ProfileFinding& f : report.findings) {
    if (f.cause()) {
      causes[f.function].push_back(&f);
    } else if (f.by_difference && f.cls == FunctionClass::kCollective && !f.more_time) {
      // The collective a slow rank hardly waits in, while the others wait
      // for it: worth a line beside the cause.
      consequences.push_back(&f);
    } else if (f.by_expectation) {
      unexpected[f.function].push_back(&f);
    }
  }
  std::string waiting;
  for (const ProfileFinding* c : consequences) {
    if (waiting.size() > 400) {
      waiting += "; ...";
      break;
    }
    waiting += absl::StrCat(waiting.empty() ? "" : "; ", DisplayName(c->function, 60), " on rank ",
                            c->rank, " (beta ", Fixed(c->pattern.beta, 3), " vs median ",
                            Fixed(c->beta_median, 3), ")");
  }
  for (const auto& [function, list] : causes) {
    Diagnosis d;
    d.job = report.job;
    d.kind = "abnormal_function";
    d.subject = Subject(function);
    d.team = DifferentialTeam(list[0]->cls);
    d.severity = Severity::kWarning;
    std::string per_rank;
    for (size_t i = 0; i < list.size(); ++i) {
      const ProfileFinding& f = *list[i];
      AddRankAndHost(f, &d);
      if ((f.beta_median > 0 && f.pattern.beta >= 2 * f.beta_median) ||
          (f.mu_median > 0 && f.pattern.mu <= 0.5 * f.mu_median)) {
        d.severity = Severity::kCritical;
      }
      if (i < 8) {
        per_rank += absl::StrCat(
            per_rank.empty() ? "" : "; ", "rank ", f.rank,
            f.host.empty() ? "" : " (" + f.host + ")", ": beta ", Fixed(f.pattern.beta, 3),
            " vs median ", Fixed(f.beta_median, 3), ", pace mu ", Fixed(f.pattern.mu, 2), " vs ",
            Fixed(f.mu_median, 2), ", differential distance ", Fixed(f.Delta, 3), " > M ",
            Fixed(f.M, 3), " + k x MAD ", Fixed(f.MAD, 3));
      } else if (i == 8) {
        per_rank += absl::StrCat("; and ", list.size() - 8, " more ranks");
      }
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    d.evidence = absl::StrCat(
        Noun(list[0]->cls), " ", DisplayName(function, 160), " is abnormal on ", list.size(),
        " of ", profiled, " profiled ranks (profiling window of ",
        Fixed(report.window_ms / 1000.0, 1), " s, ", report.trigger, "): ", per_rank, ". ",
        DifferentialMeaning(list[0]->cls), ".",
        waiting.empty()
            ? ""
            : " Unique as a consequence (waiting less for the others): " + waiting + ".");
    out.push_back(std::move(d));
  }
  for (const auto& [function, list] : unexpected) {
    const FunctionClass cls = list[0]->cls;
    // Collectives over their share on the ranks that wait for a rank already
    // named slow are explained by it, not by the job's communication.
    if (cls == FunctionClass::kCollective && !causes.empty()) continue;
    Diagnosis d;
    d.job = report.job;
    d.kind = "unexpected_function";
    d.subject = Subject(function);
    d.team = cls == FunctionClass::kPython ? Team::kAlgorithm : Team::kInfrastructure;
    d.severity = Severity::kWarning;
    double beta_min = 1, beta_max = 0;
    for (const ProfileFinding* f : list) {
      AddRankAndHost(*f, &d);
      beta_min = std::min(beta_min, f->pattern.beta);
      beta_max = std::max(beta_max, f->pattern.beta);
    }
    std::sort(d.ranks.begin(), d.ranks.end());
    const double limit = list[0]->pattern.beta - list[0]->D;  // the range's upper bound in beta
    d.evidence = absl::StrCat(
        Noun(cls), " ", DisplayName(function, 160), " is on the critical path for ",
        Fixed(beta_min * 100, 1), beta_max > beta_min ? "-" + Fixed(beta_max * 100, 1) : "",
        " % of the profiling window on ", list.size(), " of ", profiled,
        " profiled ranks; expected at most ", Fixed(limit * 100, 1),
        " % (distance from expectation ", Fixed(list[0]->D, 3), "). ",
        cls == FunctionClass::kPython
            ? "The training loop is bound by this Python code."
            : "The job is communication-bound: collectives are not hidden behind compute.");
    out.push_back(std::move(d));
  }
  return out;
}

void DifferentialLocalizationDetector::OnWindow(const JobState& job, DiagnosisSink& sink) {
  if (monitor_ == nullptr) return;
  for (Diagnosis& d : monitor_->ActiveDiagnoses(job.job(), job.window_start_ns()))
    sink.Report(std::move(d));
}

}  // namespace xpu::engine::profile
