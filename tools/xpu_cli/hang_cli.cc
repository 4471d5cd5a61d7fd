// hang_cli.cc — `xpu hang` and `xpu stacks` (command.h).
// Exit codes as in cli.h.
//
//   xpu hang --job J [--json] [--svg FILE] [--folded FILE]
//       the engine's latest hang diagnosis of J: classification, culprit
//       ranks and hosts, team, evidence, merged stacks. Without one: "no
//       hang diagnosed" (exit 0; --json prints {"job":J,"found":false}).
//   xpu stacks --job J [--json] [--svg FILE] [--folded FILE] [--deadline-s S]
//       collects the stacks of every rank of the live job J now and prints
//       the merged view (frames with the ranks in / not in them).
// Common: --engine ADDR ($XPU_ENGINE), --token-file F, --tls, --tls-ca F,
// --tls-cert F, --tls-key F.
// --json prints the report object of engine/hang/report.h with "found":true
// added: {job, found, on_demand, classification, team, culprits, culprit_ranks,
// hosts, reason, details, faulty_link, comm_id, stuck_seq, trigger,
// stall_since_ns, suspected_ns, diagnosed_ns, stall_to_diagnosis_s,
// evidence_ms, daemons_asked, daemons_answered, ranks: [...], merged_stacks}.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/json/json.h"
#include "common/timeline/private_output.h"
#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/command.h"
#include "xpu/v1/hang.grpc.pb.h"

namespace xpu::cli {
namespace {

struct HangFlags {
  std::string svg, folded;
  double deadline_s = 20;
};

// Stacks of a job: 0600, never through a symlink (common/timeline/private_output.h).
bool WriteAll(const std::string& path, const std::string& data) {
  return timeline::WritePrivateFile(path, data).ok();
}

int RunHang(const std::string& command, const HangFlags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  const CommonFlags& c = in.common;
  if (c.job.empty()) {
    err << "xpu " << command << ": --job JOB is required\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(c.connection, in.env_engine, &conn, err)) return kExitUsage;
  const std::string& engine = conn.address;
  const std::shared_ptr<grpc::ChannelCredentials>& creds = conn.credentials;
  const std::string& token = conn.token;
  auto stub = xpu::v1::HangQuery::NewStub(grpc::CreateChannel(engine, creds));
  grpc::ClientContext ctx;
  const bool collect = command == "stacks";
  // Collecting waits for the daemons: the engine's deadline plus a margin.
  const double wait_s = collect ? f.deadline_s + 10 : 10;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  if (!token.empty()) ctx.AddMetadata(kTokenMetadataKey, token);
  xpu::v1::HangRequest req;
  req.set_job(c.job);
  req.set_collect_now(collect);
  req.set_deadline_ms(static_cast<uint64_t>(f.deadline_s * 1000));
  xpu::v1::HangReply r;
  grpc::Status st = stub->Get(&ctx, req, &r);
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      err << "cannot reach engine at " << engine << ": " << st.error_message() << "\n";
      return kExitUnreachable;
    }
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      err << "xpu " << command << ": the engine at " << engine << " has no hang diagnosis\n";
      return kExitNotAvailable;
    }
    err << "xpu " << command << ": engine at " << engine << " answered: " << st.error_message()
        << "\n";
    return kExitEngineError;
  }
  if (!r.found()) {
    if (c.json) {
      out << json::Dump(json::Json{{"job", c.job}, {"found", false}}) << "\n";
    } else {
      out << "no hang diagnosed for job " << c.job << "\n";
    }
    return kExitOk;
  }
  if (!f.svg.empty() && !WriteAll(f.svg, r.svg())) {
    err << "xpu: cannot write " << f.svg << "\n";
    return kExitUsage;
  }
  if (!f.folded.empty() && !WriteAll(f.folded, r.folded())) {
    err << "xpu: cannot write " << f.folded << "\n";
    return kExitUsage;
  }
  if (c.json) {
    out << FoundReportJson(r.report_json()) << "\n";
  } else {
    out << r.text();
  }
  return kExitOk;
}

}  // namespace

void AddHangCommands(CLI::App& xpu, CommonFlags* common, CommandTable* table) {
  auto hf = std::make_shared<HangFlags>();
  const char* kJson =
      "--json prints the report object of engine/hang/report.h with \"found\":true added: "
      "{found, job, on_demand, classification, team, culprits, culprit_ranks, hosts, reason, "
      "details, faulty_link, ring_named, comm_id, stuck_seq, trigger, stall_since_ns, "
      "suspected_ns, diagnosed_ns, stall_to_diagnosis_s, evidence_ms, daemons_asked, "
      "daemons_answered, ranks: [...], merged_stacks}; without a diagnosis "
      "{job, found: false}.";
  for (const char* name : {"hang", "stacks"}) {
    const bool collect = std::string(name) == "stacks";
    CLI::App* cmd = xpu.add_subcommand(
        name, collect ? "collect and merge the live stacks of every rank of a job now"
                      : "latest hang diagnosis of a job: class, culprit ranks, merged stacks");
    AddCommonOptions(cmd, common, /*with_job=*/true);
    cmd->add_option("--svg", hf->svg, "write the merged stacks as a flame graph (SVG)")
        ->type_name("FILE");
    cmd->add_option("--folded", hf->folded, "write the merged stacks in folded form")
        ->type_name("FILE");
    cmd->add_option("--deadline-s", hf->deadline_s,
                    "how long the daemons may take to collect the stacks")
        ->type_name("S")
        ->check(flags::PositiveNumberUpTo(600));
    cmd->footer(collect ? std::string("Collects the stacks of every rank of the live job now and "
                                      "prints the merged view (frames with the ranks in / not in "
                                      "them).\n") +
                              kJson
                        : std::string("Classification, culprit ranks and hosts, team, evidence "
                                      "and the merged stacks of all ranks; without one: \"no "
                                      "hang diagnosed\" (exit 0).\n") +
                              kJson);
    (*table)[cmd] = [name = std::string(name), hf](const Invocation& in) {
      return RunHang(name, *hf, in);
    };
  }
}

}  // namespace xpu::cli
