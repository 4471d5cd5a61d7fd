// timeline_bench — `xpu timeline dump` at scale: the real engine (in this
// process, gRPC on an ephemeral port), synthetic daemons speaking the real
// Ingest.Stream protocol (one stream each, ranks_per_daemon ranks per
// daemon, like one daemon per node) and the real CLI code path
// (RunCli: Query.TimelineDump, raw files, clock alignment, Perfetto
// trace, flame graph, manifest). Prints figures; never asserts speed.
//
//   timeline_bench [--ranks 1024] [--ops 1000] [--ranks-per-daemon 8]
//                  [--format perfetto|json|both|auto] [--out DIR] [--keep]
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/json/json.h"
#include "common/timeline/synthetic_job.h"
#include "engine/engine.h"
#include "engine/testing/synthetic_daemon.h"
#include "tools/xpu_cli/cli.h"

namespace {

using xpu::engine::testing::SyntheticDaemon;
using xpu::timeline::SyntheticJob;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t FileSize(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string Read(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A number of the manifest as text ("?" when absent).
std::string Field(const xpu::json::Json& j, const char* key) {
  return j.is_object() && j.contains(key) ? xpu::json::Dump(j[key]) : "?";
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 1024, ops = 1000, per_daemon = 8;
  std::string format = "perfetto", out, dump_ranks;
  bool keep = false;
  CLI::App app(
      "timeline_bench: `xpu timeline dump` of a synthetic job through the real engine, gRPC "
      "streams and CLI code path. Prints figures; never asserts speed.");
  xpu::flags::Configure(app, "timeline_bench");
  app.add_option("--ranks", ranks, "ranks of the synthetic job")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--ops", ops, "ops per rank (about)")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--ranks-per-daemon", per_daemon, "ranks per synthetic daemon (node)")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--format", format, "perfetto, json, both or auto")->type_name("FORMAT");
  app.add_option("--dump-ranks", dump_ranks,
                 "the dump's --ranks (e.g. all); default: none, the CLI's default selection")
      ->type_name("LIST");
  app.add_option("--out", out, "dump directory (default: a temporary one)")->type_name("DIR");
  app.add_flag("--keep", keep, "keep the temporary directory");
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 64); rc >= 0) return rc;
  std::string tmp =
      (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + std::string("/xpu_tl_bench_XXXXXX");
  if (mkdtemp(tmp.data()) == nullptr) return 1;
  if (out.empty()) out = tmp + "/dump";

  xpu::engine::EngineOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_addr = "off";
  o.db = tmp + "/engine.db";
  o.window_s = 3600;
  auto engine = xpu::engine::Engine::Start(o);
  if (!engine.ok()) {
    std::cerr << "engine: " << engine.status() << "\n";
    return 1;
  }
  SyntheticJob job;
  job.job = "bench";
  job.ranks = ranks;
  job.ranks_per_host = per_daemon;
  job.steps = xpu::timeline::SyntheticStepsFor(job, static_cast<size_t>(ops));
  const int hosts = (ranks + per_daemon - 1) / per_daemon;
  for (int h = 0; h < hosts; ++h) job.host_offsets_ns.push_back((h % 7) * 250000 - 750000);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<SyntheticDaemon>> daemons;
  for (int h = 0; h < hosts; ++h) {
    std::vector<int> rs;
    for (int r = h * per_daemon; r < std::min(ranks, (h + 1) * per_daemon); ++r) rs.push_back(r);
    daemons.push_back(
        std::make_unique<SyntheticDaemon>((*engine)->port(), "node" + std::to_string(h), job, rs));
    if (!daemons.back()->Start()) {
      std::cerr << "daemon " << h << " could not connect\n";
      return 1;
    }
  }
  // Wait until the engine knows every rank.
  for (int i = 0; i < 6000; ++i) {
    auto j = (*engine)->registry().FindJob(job.job);
    if (j) {
      std::lock_guard<std::mutex> l(j->mu());
      if (j->processes().size() == static_cast<size_t>(ranks)) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double setup_s = Since(t0);

  std::ostringstream cli_out, cli_err;
  t0 = std::chrono::steady_clock::now();
  std::vector<std::string> args = {"timeline", "dump", "--job",       job.job, "--out",
                                   out,        "--format", format, "--deadline-s", "120"};
  if (!dump_ranks.empty()) {
    args.push_back("--ranks");
    args.push_back(dump_ranks);
  }
  const int rc =
      xpu::cli::RunCli(args, "127.0.0.1:" + std::to_string((*engine)->port()), cli_out, cli_err);
  const double dump_s = Since(t0);
  const xpu::json::Json manifest =
      xpu::json::Json::parse(Read(out + "/dump.json"), nullptr, /*allow_exceptions=*/false);
  const xpu::json::Json seconds =
      manifest.is_object() ? manifest.value("seconds", xpu::json::Json()) : xpu::json::Json();
  const uint64_t ops_total = manifest.is_object() ? manifest.value("ops", uint64_t{0}) : 0;
  const uint64_t packed = manifest.is_object() ? manifest.value("packed_bytes", uint64_t{0}) : 0;
  const uint64_t trace_bytes = FileSize(out + "/trace.perfetto-trace");
  const uint64_t json_bytes = FileSize(out + "/trace.json");

  std::printf("timeline_bench: %d ranks x %d ops (%d daemons x %d ranks), format %s\n", ranks,
              static_cast<int>(xpu::timeline::SyntheticOpsPerRank(job)), hosts, per_daemon,
              format.c_str());
  std::printf("  exit code               %d\n", rc);
  std::printf("  setup (daemons connect) %.2f s\n", setup_s);
  std::printf("  dump + merge, total     %.2f s\n", dump_s);
  std::printf("    fetch (fan-out, transfer, raw files) %s s\n", Field(seconds, "fetch").c_str());
  std::printf("    clock alignment                      %s s\n", Field(seconds, "align").c_str());
  std::printf("    perfetto trace                       %s s\n",
              Field(seconds, "perfetto").c_str());
  std::printf("    chrome json                          %s s\n", Field(seconds, "json").c_str());
  std::printf("    flame graph                          %s s\n",
              Field(seconds, "flamegraph").c_str());
  std::printf("  ops                     %llu\n", static_cast<unsigned long long>(ops_total));
  std::printf("  bytes/op before convert %.1f (%llu bytes packed)\n",
              ops_total ? double(packed) / ops_total : 0.0,
              static_cast<unsigned long long>(packed));
  std::printf("  perfetto trace          %llu bytes (%.1f bytes/op)\n",
              static_cast<unsigned long long>(trace_bytes),
              ops_total ? double(trace_bytes) / ops_total : 0.0);
  if (json_bytes) {
    std::printf("  chrome json             %llu bytes (%.1f bytes/op)\n",
                static_cast<unsigned long long>(json_bytes),
                ops_total ? double(json_bytes) / ops_total : 0.0);
  }
  std::printf("  ranks answered          %s/%s\n", Field(manifest, "ranks_answered").c_str(),
              Field(manifest, "ranks_total").c_str());
  const uint64_t left_out =
      manifest.is_object() ? manifest.value("ranks_left_out", uint64_t{0}) : 0;
  if (left_out > 0) {
    std::printf("  default selection       %s; %llu ranks left out\n",
                manifest.value("selection", std::string()).c_str(),
                static_cast<unsigned long long>(left_out));
  }
  if (rc != 0) std::fprintf(stderr, "%s", cli_err.str().c_str());
  daemons.clear();
  (*engine)->Shutdown();
  if (!keep) {
    std::string cmd = "rm -rf '" + tmp + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", tmp.c_str());
  }
  // The smoke test checks that the dump ran and every rank asked for
  // (all, or the default selection) answered with all its ops.
  const uint64_t asked = static_cast<uint64_t>(ranks) - left_out;
  const bool complete =
      Field(manifest, "ranks_answered") == std::to_string(asked) &&
      ops_total == asked * xpu::timeline::SyntheticOpsPerRank(job);
  return rc == 0 && complete ? 0 : 1;
}
