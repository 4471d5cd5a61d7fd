#include "tests/scenarios/scenario.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace xpu::scenarios {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Field(const Struct& s, const std::string& name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? nullptr : &it->second;
}
double Num(const Struct& s, const std::string& name, double def) {
  const Value* v = Field(s, name);
  return v && v->kind_case() == Value::kNumberValue ? v->number_value() : def;
}
std::string Str(const Struct& s, const std::string& name, const std::string& def = "") {
  const Value* v = Field(s, name);
  return v && v->kind_case() == Value::kStringValue ? v->string_value() : def;
}
bool Bool(const Struct& s, const std::string& name, bool def) {
  const Value* v = Field(s, name);
  return v && v->kind_case() == Value::kBoolValue ? v->bool_value() : def;
}
std::vector<int> Ints(const Value* v) {
  std::vector<int> out;
  if (v && v->kind_case() == Value::kListValue) {
    for (const Value& e : v->list_value().values())
      out.push_back(static_cast<int>(e.number_value()));
  }
  return out;
}
// "ranks": [..] or "ranks": "all" (every rank).
std::set<int> RankSet(const Struct& s, int nranks) {
  const Value* v = Field(s, "ranks");
  std::set<int> out;
  if (v && v->kind_case() == Value::kStringValue && v->string_value() == "all") {
    for (int r = 0; r < nranks; ++r) out.insert(r);
  } else {
    for (int r : Ints(v)) out.insert(r);
  }
  return out;
}

absl::Status ParseFault(const Struct& fs, int n, ScenarioFault* out) {
  ScenarioFault& fault = *out;
  fault.from_step = static_cast<int>(Num(fs, "from_step", 0));
  fault.until_step = static_cast<int>(Num(fs, "until_step", -1));
  for (const auto& [name, val] : fs.fields()) {
    if (val.kind_case() != Value::kStructValue) continue;
    const Struct& c = val.struct_value();
    if (name == "slow_gpu") {
      fault.slow_gpu_ranks = RankSet(c, n);
      fault.slow_gpu_factor = Num(c, "factor", 2.0);
    } else if (name == "shared_gpu") {
      fault.shared_gpu_ranks = RankSet(c, n);
      fault.shared_gpu_share = Num(c, "share", 0.3);
      fault.shared_gpu_factor = Num(c, "factor", 8.0);
    } else if (name == "slow_link") {
      fault.slow_link_ranks = RankSet(c, n);
      fault.slow_link_factor = Num(c, "factor", 3.0);
    } else if (name == "gc") {
      fault.gc_ranks = RankSet(c, n);
      fault.gc_ms_per_layer = Num(c, "ms_per_layer", 5);
    } else if (name == "sync_every_layer") {
      fault.sync_ranks = RankSet(c, n);
      fault.sync_host_us = Num(c, "host_us", 0);
    } else if (name == "dataloader") {
      fault.dataloader_ranks = RankSet(c, n);
      fault.dataloader_ms = Num(c, "ms", 20);
    } else if (name == "minority_kernels") {
      fault.minority_ranks = RankSet(c, n);
      fault.minority_us = Num(c, "us_per_layer", 2000);
    } else if (name == "bad_gemm_layout") {
      fault.bad_gemm = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown fault \"", name, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Scenario> ParseScenario(const std::string& json_text) {
  Struct root;
  auto st = google::protobuf::util::JsonStringToMessage(json_text, &root);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("scenario JSON: ", st.ToString()));
  Scenario sc;
  sc.name = Str(root, "name");
  if (sc.name.empty()) return absl::InvalidArgumentError("scenario without \"name\"");
  sc.description = Str(root, "description");
  sc.job.job = "scenario-" + sc.name;
  sc.job.job_name = Str(root, "backbone", "synthetic-backbone");
  sc.job.ranks = static_cast<int>(Num(root, "ranks", 8));
  sc.job.ranks_per_host = static_cast<int>(Num(root, "ranks_per_host", 4));
  sc.job.layers = static_cast<int>(Num(root, "layers", 4));
  sc.job.step_markers = Bool(root, "step_markers", true);
  sc.job.seed = static_cast<uint32_t>(Num(root, "seed", 1));
  sc.windows = static_cast<int>(Num(root, "windows", 6));
  sc.steps_per_window = static_cast<int>(Num(root, "steps_per_window", 5));
  sc.max_windows = static_cast<int>(Num(root, "max_windows", 4));
  sc.small_job = Bool(root, "small_job", false);
  if (sc.job.ranks < 1) return absl::InvalidArgumentError("\"ranks\" must be >= 1");
  if (const Value* f = Field(root, "fault"); f && f->kind_case() == Value::kStructValue) {
    if (absl::Status st = ParseFault(f->struct_value(), sc.job.ranks, &sc.job.fault); !st.ok())
      return st;
  }
  sc.job.gpu_model = Str(root, "gpu_model");
  sc.job.peak_tflops = Num(root, "peak_tflops", 400);
  if (const Value* h = Field(root, "history"); h && h->kind_case() == Value::kStructValue) {
    const Struct& hs = h->struct_value();
    sc.history.runs = static_cast<int>(Num(hs, "runs", 1));
    sc.history.windows = static_cast<int>(Num(hs, "windows", 0));
    if (const Value* f = Field(hs, "fault"); f && f->kind_case() == Value::kStructValue) {
      if (absl::Status st = ParseFault(f->struct_value(), sc.job.ranks, &sc.history.fault);
          !st.ok())
        return st;
      sc.history.faulty = true;
    }
  }
  if (const Value* c = Field(root, "calibration"); c && c->kind_case() == Value::kStructValue) {
    if (sc.job.gpu_model.empty())
      return absl::InvalidArgumentError("\"calibration\" needs \"gpu_model\"");
    if (const Value* g = Field(c->struct_value(), "gemm_tflops");
        g && g->kind_case() == Value::kStructValue) {
      for (const auto& [dtype, v] : g->struct_value().fields())
        sc.calibrated_gemm_tflops[dtype] = v.number_value();
    }
    if (const Value* b = Field(c->struct_value(), "busbw");
        b && b->kind_case() == Value::kListValue) {
      for (const Value& x : b->list_value().values()) {
        const Struct& xs = x.struct_value();
        Scenario::CalibratedBusBw p;
        p.op = Str(xs, "op");
        p.bytes = static_cast<uint64_t>(Num(xs, "bytes", 0));
        p.nranks = static_cast<int>(Num(xs, "nranks", 0));
        p.nodes = static_cast<int>(Num(xs, "nodes", 1));
        p.gbps = Num(xs, "gbps", 0);
        sc.calibrated_busbw.push_back(p);
      }
    }
  }
  if (const Value* e = Field(root, "expect"); e && e->kind_case() == Value::kListValue) {
    for (const Value& x : e->list_value().values()) {
      const Struct& xs = x.struct_value();
      Expectation ex;
      ex.kind = Str(xs, "kind");
      ex.team = Str(xs, "team");
      ex.ranks = Ints(Field(xs, "ranks"));
      ex.evidence = Str(xs, "evidence");
      if (ex.kind.empty()) return absl::InvalidArgumentError("expectation without \"kind\"");
      sc.expect.push_back(ex);
    }
  }
  if (const Value* a = Field(root, "allow"); a && a->kind_case() == Value::kListValue) {
    for (const Value& x : a->list_value().values()) sc.allow.push_back(x.string_value());
  }
  if (const Value* ft = Field(root, "fake_train"); ft && ft->kind_case() == Value::kStructValue) {
    if (const Value* env = Field(ft->struct_value(), "env");
        env && env->kind_case() == Value::kStructValue) {
      for (const auto& [k, v] : env->struct_value().fields())
        sc.fake_train_env[k] = v.string_value();
    }
    if (const Value* args = Field(ft->struct_value(), "args");
        args && args->kind_case() == Value::kListValue) {
      for (const Value& x : args->list_value().values())
        sc.fake_train_args.push_back(x.string_value());
    }
  }
  return sc;
}

absl::StatusOr<Scenario> LoadScenario(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  absl::StatusOr<Scenario> s = ParseScenario(ss.str());
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.status().message()));
  return s;
}

}  // namespace xpu::scenarios
