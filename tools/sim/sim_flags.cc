#include "tools/sim/sim_flags.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/cli/flags.h"
#include "common/json/json.h"

namespace xpu::sim {
namespace {

constexpr int kUsage = 2;
constexpr int kRunError = 3;

struct RawFlags {
  int ranks = 0;
  int ranks_per_host = 8;
  std::string layout = "dp";
  std::string timing = "sampled";
  std::string wire = "compact";
  std::vector<std::string> faults;
};

void AddFlags(CLI::App& app, SimOptions* o, RawFlags* raw) {
  app.add_option("--ranks", raw->ranks, "ranks (processes) of the simulated job")
      ->type_name("N")
      ->required()
      ->transform(flags::UnsignedAtLeast(2));
  app.add_option("--ranks-per-host", raw->ranks_per_host, "ranks per host (one stream per host)")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--layout", raw->layout,
                 "dp (data-parallel) or tpXppY (tensor-parallel groups of X inside a host, Y "
                 "pipeline stages across hosts, data-parallel over the rest), e.g. tp8pp4")
      ->type_name("LAYOUT");
  app.add_option("--windows", o->windows, "windows to play")->type_name("W")->transform(
      flags::UnsignedAtLeast(1));
  app.add_option("--window-s", o->window_s,
                 "window length; must equal the engine's --window-s (the sim passes it to the "
                 "engine it starts)")
      ->type_name("S")
      ->check(flags::PositiveNumber());
  app.add_option("--steps-per-window", o->model.steps_per_window, "training steps per window")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--layers", o->model.layers, "transformer layers of the model")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--microbatches", o->model.microbatches, "microbatches per step (pipelines)")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--timing", raw->timing,
                 "the hook's timing policy to model: sampled (its default) or all")
      ->type_name("POLICY")
      ->check(CLI::IsMember({"sampled", "all"}));
  app.add_option("--wire", raw->wire,
                 "record encoding, as a daemon's --wire: compact (when the engine reads it) or "
                 "raw; bytes_per_rank_step reports what was sent")
      ->type_name("ENCODING")
      ->check(CLI::IsMember({"compact", "raw"}));
  app.add_option("--fault", raw->faults,
                 "KIND:RANKS[:AT_WINDOW] (repeatable; ranks like 3 or 0,8-11; AT_WINDOW counts "
                 "from 0, default 2). Kinds:\n" +
                     FaultKindHelp())
      ->type_name("SPEC");
  app.add_option("--max-windows", o->max_windows,
                 "a fault must be diagnosed within this many windows of its first")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--engine", o->engine,
                 "embedded (start a private xpu-engine) or HOST:PORT of a running engine whose "
                 "windows are --window-s long")
      ->type_name("WHERE");
  app.add_option("--engine-binary", o->engine_binary,
                 "xpu-engine to start (default: the one next to xpu-sim)")
      ->type_name("PATH");
  app.add_option("--engine-cpus", o->engine_cpus, "pin the started engine to these CPUs, e.g. 0-3")
      ->type_name("LIST");
  app.add_option("--engine-arg", o->engine_args, "extra argument for the started engine (repeatable)")
      ->type_name("ARG")
      ->allow_extra_args(false);
  app.add_option("--token-file", o->token_file, "the engine's shared token")->type_name("PATH");
  app.add_option("--hang-floor-s", o->hang_floor_s,
                 "the simulated hook's hang threshold (XPU_HANG_FLOOR_S); default min(10, "
                 "window/2)")
      ->type_name("S");
  app.add_option("--connections", o->connections, "TCP connections the host streams share")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--threads", o->threads, "threads building batches (0: one per CPU)")
      ->type_name("N");
  app.add_option("--job", o->model.job, "job id of the simulated job")->type_name("ID");
  app.add_option("--seed", o->model.seed, "seed of the model's jitter")->type_name("N");
  app.add_flag("--quiet", [o](int64_t) { o->progress = false; }, "no progress lines on stderr");
  app.add_flag("--keep-engine-dir", o->keep_engine_dir,
               "keep the started engine's database and log");
}

}  // namespace

ParsedFlags ParseSimFlags(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err) {
  ParsedFlags p;
  CLI::App app;
  flags::Configure(app, "xpu-sim");
  app.description(
      "xpu-sim: plays a training job of N ranks on N/ranks-per-host hosts through the real "
      "daemon -> engine gRPC path (one Ingest stream per host, the messages a daemon sends), "
      "injects faults, answers the engine's commands (evidence, history) like a daemon, and "
      "checks that the engine diagnoses each fault with the right culprit and team.\n"
      "Progress goes to stderr; one JSON line to stdout. Exit status: 0 every fault found in "
      "time (or nothing diagnosed on a healthy run), 1 not, 2 usage error, 3 no run.\n"
      "Example: xpu-sim --ranks 256 --fault slow_gpu:17 --windows 5");
  RawFlags raw;
  AddFlags(app, &p.options, &raw);
  flags::ParseResult r = flags::Parse(app, args);
  if (r.outcome != flags::Outcome::kRun) {
    p.exit_now = true;
    p.exit_code = r.outcome == flags::Outcome::kError ? kUsage : 0;
    (r.outcome == flags::Outcome::kError ? err : out) << r.text << (r.text.empty() || r.text.back() == '\n' ? "" : "\n");
    return p;
  }
  auto usage = [&](const std::string& what) {
    err << "xpu-sim: " << what << " (see xpu-sim --help)\n";
    p.exit_now = true;
    p.exit_code = kUsage;
    return p;
  };
  ModelSpec& m = p.options.model;
  m.ranks = raw.ranks;
  m.ranks_per_host = raw.ranks_per_host;
  m.timing = raw.timing == "all" ? TimingPolicy::kAll : TimingPolicy::kSampled;
  p.options.compact_records = raw.wire != "raw";
  m.job_name = m.job;
  absl::StatusOr<Layout> layout = ParseLayout(raw.layout, m.ranks, m.ranks_per_host);
  if (!layout.ok()) return usage(std::string(layout.status().message()));
  m.layout = *layout;
  if (!m.layout.data_parallel_only() && m.layers < m.layout.pp) {
    return usage(absl::StrCat("--layers ", m.layers, " gives a stage of ", m.layout.pp,
                              " no layer"));
  }
  int hang_faults = 0;
  for (const std::string& f : raw.faults) {
    absl::StatusOr<FaultSpec> spec = ParseFault(f, m.ranks);
    if (!spec.ok()) return usage(std::string(spec.status().message()));
    if (spec->at_window >= p.options.windows) {
      return usage(absl::StrCat("--fault ", f, ": window ", spec->at_window,
                                " is not played (--windows ", p.options.windows, ")"));
    }
    hang_faults += IsHangFault(spec->kind);
    m.faults.push_back(*spec);
  }
  if (hang_faults > 1) {
    return usage("one hang fault (stop, python, hang, mismatch) per run: the job hangs once");
  }
  if (p.options.engine.empty()) return usage("--engine must be embedded or HOST:PORT");
  return p;
}

int SimMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedFlags p = ParseSimFlags(args, out, err);
  if (p.exit_now) return p.exit_code;
  absl::StatusOr<SimReport> r = RunSimulation(p.options);
  if (!r.ok()) {
    err << "xpu-sim: " << r.status().message() << "\n";
    return kRunError;
  }
  out << json::Dump(r->json) << "\n";
  out.flush();
  return r->ok ? 0 : 1;
}

}  // namespace xpu::sim
