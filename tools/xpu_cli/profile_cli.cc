// profile_cli.cc — `xpu profile` (command.h). Exit codes as
// in cli.h.
//
//   xpu profile --job J [--seconds S] [--json] [--deadline-s D]
//       runs a profiling window of S seconds (default: the engine's, 15) on
//       every rank of the live job J now: CUPTI kernel activity plus the
//       Python events, summarized per rank into PerfTracker behaviour
//       patterns, then the differential localization. Prints the ranks (and
//       why some were not profiled, e.g. "skipped: another CUPTI client is
//       active"), the abnormal function executions and the diagnoses.
//   xpu profile --job J --last [--json]
//       the latest result (automatic, after a throughput regression, or on
//       demand) without starting a window; "no profiling window" otherwise.
// Common: --engine ADDR ($XPU_ENGINE), --token-file F, --tls, --tls-ca F,
// --tls-cert F, --tls-key F.
// --json prints the report object of engine/profile/profile_report.h with
// "found":true added: {found, job, trigger, requested_ns, finished_ns,
// window_ms, daemons_asked, daemons_answered, ranks_profiled, ranks_skipped,
// skipped_reason, ranks: [...], functions: [...], findings: [...],
// diagnoses: [...]}; without a result {"job":J,"found":false}.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "common/json/json.h"
#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/command.h"
#include "xpu/ring.h"
#include "xpu/v1/profile.grpc.pb.h"

namespace xpu::cli {
namespace {

struct ProfileFlags {
  bool last = false;
  double seconds = 0;     // 0 = the engine's default
  double deadline_s = 0;  // 0 = window + 30 s
};

int RunProfile(const ProfileFlags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  const CommonFlags& c = in.common;
  if (c.job.empty()) {
    err << "xpu profile: --job JOB is required\n";
    return kExitUsage;
  }
  if (f.last && f.seconds > 0) {
    err << "xpu profile: --last starts no window; --seconds does not apply\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(c.connection, in.env_engine, &conn, err)) return kExitUsage;
  auto stub = xpu::v1::ProfileQuery::NewStub(grpc::CreateChannel(conn.address, conn.credentials));
  grpc::ClientContext ctx;
  xpu::v1::ProfileRequest req;
  req.set_job(c.job);
  req.set_seconds(static_cast<uint32_t>(f.seconds));
  req.set_deadline_ms(static_cast<uint64_t>(f.deadline_s * 1000));
  // The window (the engine's default when unknown here: allow the longest)
  // plus its grace and a margin.
  const double window_s = f.seconds > 0 ? f.seconds : XPU_PROFILE_MAX_DURATION_MS / 1000.0;
  const double wait_s = f.last ? 10 : (f.deadline_s > 0 ? f.deadline_s : window_s + 30) + 10;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  if (!conn.token.empty()) ctx.AddMetadata(kTokenMetadataKey, conn.token);
  xpu::v1::ProfileResult r;
  grpc::Status st = f.last ? stub->Latest(&ctx, req, &r) : stub->Run(&ctx, req, &r);
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      err << "cannot reach engine at " << conn.address << ": " << st.error_message() << "\n";
      return kExitUnreachable;
    }
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      err << "xpu profile: the engine at " << conn.address << " has no profiling windows\n";
      return kExitNotAvailable;
    }
    if (st.error_code() == grpc::StatusCode::NOT_FOUND ||
        st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      err << "xpu profile: " << st.error_message() << "\n";
      return kExitNotAvailable;
    }
    err << "xpu profile: engine at " << conn.address << " answered: " << st.error_message() << "\n";
    return kExitEngineError;
  }
  if (!r.found()) {
    if (c.json) {
      out << json::Dump(json::Json{{"job", c.job}, {"found", false}}) << "\n";
    } else {
      out << "no profiling window for job " << c.job << "\n";
    }
    return kExitOk;
  }
  if (c.json) {
    out << FoundReportJson(r.report_json()) << "\n";
  } else {
    out << r.text();
  }
  return kExitOk;
}

}  // namespace

void AddProfileCommand(CLI::App& xpu, CommonFlags* common, CommandTable* table) {
  auto pf = std::make_shared<ProfileFlags>();
  CLI::App* cmd = xpu.add_subcommand(
      "profile",
      "profiling window on every rank of a job now (or the latest result): abnormal functions on "
      "abnormal ranks");
  AddCommonOptions(cmd, common, /*with_job=*/true);
  cmd->add_option("--seconds", pf->seconds, "length of the window (default: the engine's, 15 s)")
      ->type_name("S")
      ->default_str("")
      ->check(flags::PositiveNumberUpTo(XPU_PROFILE_MAX_DURATION_MS / 1000.0));
  cmd->add_flag("--last", pf->last,
                "the latest result (after a throughput regression or on demand); no new window");
  cmd->add_option("--deadline-s", pf->deadline_s,
                  "how long to wait for the daemons (default: the window + 30 s)")
      ->type_name("S")
      ->default_str("")
      ->check(flags::PositiveNumberUpTo(900));
  cmd->footer(
      "Runs a CUPTI activity window on every rank of the live job now and prints the "
      "differential localization: the ranks (and why some were not profiled), the abnormal "
      "function executions and the diagnoses.\n"
      "--json prints the report object of engine/profile/profile_report.h with \"found\":true "
      "added; without a result {job, found: false}.");
  (*table)[cmd] = [pf](const Invocation& in) { return RunProfile(*pf, in); };
}

}  // namespace xpu::cli
