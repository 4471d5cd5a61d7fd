#include "tools/sim/fault.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace xpu::sim {
namespace {

struct KindInfo {
  FaultKind kind;
  const char* name;
  const char* help;
};

const KindInfo kKinds[] = {
    {FaultKind::kSlowGpu, "slow_gpu", "GEMMs run 2x longer (slow_gpu, operations)"},
    {FaultKind::kSlowLink, "slow_link",
     "collectives and ring links the rank joins run 3x longer (slow_link, operations)"},
    {FaultKind::kGc, "gc",
     "a 6 ms Python GC pause before every layer (kernel_issue_stall gc, algorithm)"},
    {FaultKind::kDataLoader, "dataloader",
     "the DataLoader takes 15 ms instead of 0.5 ms per step (slow_dataloader, algorithm)"},
    {FaultKind::kSync, "sync",
     "a stream synchronize after every forward layer (kernel_issue_stall sync, algorithm)"},
    {FaultKind::kStop, "stop",
     "the process is stopped (SIGSTOP) before a collective (hang_non_communication, "
     "operations)"},
    {FaultKind::kPython, "python",
     "the process stays in a Python function and never issues the collective "
     "(hang_non_communication, algorithm)"},
    {FaultKind::kHang, "hang",
     "a collective hangs inside the kernel: the ring link from the rank to the next stalls "
     "(hang_communication, operations: the located link; both ends named)"},
    {FaultKind::kMismatch, "mismatch",
     "the rank issues the collective with another size than its peers (hang_mismatch, "
     "algorithm)"},
};

}  // namespace

const std::vector<FaultKind>& AllFaultKinds() {
  static const std::vector<FaultKind> all = [] {
    std::vector<FaultKind> v;
    for (const KindInfo& k : kKinds) v.push_back(k.kind);
    return v;
  }();
  return all;
}

const char* FaultKindName(FaultKind k) {
  for (const KindInfo& i : kKinds) {
    if (i.kind == k) return i.name;
  }
  return "unknown";
}

std::string FaultKindHelp() {
  std::string out;
  for (const KindInfo& k : kKinds) absl::StrAppend(&out, "  ", k.name, ": ", k.help, "\n");
  return out;
}

bool IsHangFault(FaultKind k) {
  return k == FaultKind::kStop || k == FaultKind::kPython || k == FaultKind::kHang ||
         k == FaultKind::kMismatch;
}

absl::StatusOr<std::vector<int32_t>> ParseRankList(std::string_view view, int32_t nranks) {
  const std::string text(view);
  std::set<int32_t> out;
  if (text.empty()) return absl::InvalidArgumentError("empty rank list");
  for (const std::string& part : std::vector<std::string>(absl::StrSplit(text, ','))) {
    std::vector<std::string> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int32_t lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &hi))) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not a rank or a range A-B"));
    }
    if (ends.size() == 1) hi = lo;
    if (lo < 0 || hi < lo || hi >= nranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks '", part, "' are outside 0..", nranks - 1));
    }
    if (static_cast<int64_t>(hi) - lo > 1000000) {
      return absl::InvalidArgumentError(absl::StrCat("range '", part, "' is too long"));
    }
    for (int32_t r = lo; r <= hi; ++r) out.insert(r);
  }
  return std::vector<int32_t>(out.begin(), out.end());
}

std::string RankListString(const std::vector<int32_t>& ranks) {
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    absl::StrAppend(&out, out.empty() ? "" : ",", ranks[i]);
    if (j > i) absl::StrAppend(&out, "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

absl::StatusOr<FaultSpec> ParseFault(std::string_view view, int32_t nranks) {
  const std::string text(view);
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2 || parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fault '", text, "': expected KIND:RANKS[:AT_WINDOW]"));
  }
  FaultSpec f;
  bool known = false;
  for (const KindInfo& k : kKinds) {
    if (parts[0] == k.name) {
      f.kind = k.kind;
      known = true;
    }
  }
  if (!known) {
    std::vector<std::string> names;
    for (const KindInfo& k : kKinds) names.push_back(k.name);
    return absl::InvalidArgumentError(absl::StrCat("--fault '", text, "': unknown kind '",
                                                   parts[0], "' (", absl::StrJoin(names, ", "),
                                                   ")"));
  }
  absl::StatusOr<std::vector<int32_t>> ranks = ParseRankList(parts[1], nranks);
  if (!ranks.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fault '", text, "': ", ranks.status().message()));
  }
  f.ranks = *std::move(ranks);
  if (parts.size() == 3 && (!absl::SimpleAtoi(parts[2], &f.at_window) || f.at_window < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--fault '", text, "': AT_WINDOW must be a window number >= 0"));
  }
  return f;
}

Expectation ExpectationFor(const FaultSpec& f, const std::function<int32_t(int32_t)>& ring_next) {
  Expectation e;
  e.ranks = f.ranks;
  switch (f.kind) {
    case FaultKind::kSlowGpu:
      e.kinds = {"slow_gpu"};
      e.team = "operations";
      break;
    case FaultKind::kSlowLink:
      e.kinds = {"slow_link"};
      e.team = "operations";
      break;
    case FaultKind::kGc:
      e.kinds = {"kernel_issue_stall"};
      e.subject_prefix = "gc";
      e.team = "algorithm";
      break;
    case FaultKind::kDataLoader:
      e.kinds = {"slow_dataloader"};
      e.team = "algorithm";
      break;
    case FaultKind::kSync:
      e.kinds = {"kernel_issue_stall"};
      e.subject_prefix = "sync";
      e.team = "algorithm";
      break;
    case FaultKind::kStop:
      e.kinds = {"hang_non_communication"};
      e.team = "operations";
      break;
    case FaultKind::kPython:
      e.kinds = {"hang_non_communication"};
      e.team = "algorithm";
      break;
    case FaultKind::kHang: {
      e.kinds = {"hang_communication"};
      e.team = "operations";  // the located link (docs/hang-diagnosis.md)
      std::set<int32_t> ends(f.ranks.begin(), f.ranks.end());
      for (int32_t r : f.ranks) ends.insert(ring_next(r));
      e.ranks.assign(ends.begin(), ends.end());
      break;
    }
    case FaultKind::kMismatch:
      e.kinds = {"hang_mismatch"};
      e.team = "algorithm";
      break;
  }
  return e;
}

bool IsSymptomKind(std::string_view kind) {
  return kind == "throughput_regression" || kind == "abnormal_function" ||
         kind == "unexpected_function" || kind == "rank_silent" || kind == "void_inter";
}

}  // namespace xpu::sim
