// hang_cli.cc — see hang_cli.h.
#include "tools/xpu_cli/hang_cli.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/connection.h"
#include "xpu/v1/xpu.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr char kHangUsage[] =
    "xpu hang --job JOB [--json] [--svg FILE] [--folded FILE]\n"
    "    latest hang diagnosis of JOB: classification, culprit ranks/hosts, team,\n"
    "    evidence and the merged stacks of all ranks\n"
    "xpu stacks --job JOB [--json] [--svg FILE] [--folded FILE] [--deadline-s S]\n"
    "    collect the stacks of every rank now and print the merged view\n"
    "common: --engine ADDR, --token-file F, --tls, --tls-ca F, --tls-cert F, --tls-key F\n";

struct HangFlags {
  std::string command, job, engine, token_file, svg, folded, tls_ca, tls_cert, tls_key;
  bool json = false, help = false, tls = false;
  double deadline_s = 20;
};

bool WriteAll(const std::string& path, const std::string& data) {
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o << data;
  return static_cast<bool>(o);
}

bool Parse(const std::vector<std::string>& args, HangFlags* f, std::string* error) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) {
        *error = a + " needs a value";
        return false;
      }
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--job") {
      if (!value(&f->job)) return false;
    } else if (IsConnectionValueFlag(a)) {
      if (!value(&v)) return false;
      SetConnectionFlag(a, v, f);
    } else if (a == "--svg") {
      if (!value(&f->svg)) return false;
    } else if (a == "--folded") {
      if (!value(&f->folded)) return false;
    } else if (a == "--deadline-s") {
      if (!value(&v) || !ParseSeconds(a, v, 600, &f->deadline_s, error)) return false;
    } else if (a == "--tls") {
      f->tls = true;
    } else if (a == "--json") {
      f->json = true;
    } else if (a == "--help" || a == "-h") {
      f->help = true;
    } else if (!a.empty() && a[0] == '-') {
      *error = "unknown flag " + a;
      return false;
    } else if (f->command.empty()) {
      f->command = a;
    } else {
      *error = "unexpected argument " + a;
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsHangCommand(const std::vector<std::string>& args) {
  const std::string word = CommandWord(args, {"--job", "--svg", "--folded", "--deadline-s"});
  return word == "hang" || word == "stacks";
}

int RunHangCli(const std::vector<std::string>& args, const std::string& env_engine,
               std::ostream& out, std::ostream& err) {
  HangFlags f;
  std::string error;
  if (!Parse(args, &f, &error)) {
    err << "xpu: " << error << " (see xpu hang --help)\n";
    return kExitUsage;
  }
  if (f.help) {
    out << kHangUsage;
    return kExitOk;
  }
  if (f.job.empty()) {
    err << "xpu " << f.command << ": --job JOB is required\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(ConnectionFlagsOf(f), env_engine, &conn, err)) return kExitUsage;
  const std::string& engine = conn.address;
  const std::shared_ptr<grpc::ChannelCredentials>& creds = conn.credentials;
  const std::string& token = conn.token;
  auto stub = xpu::v1::HangQuery::NewStub(grpc::CreateChannel(engine, creds));
  grpc::ClientContext ctx;
  const bool collect = f.command == "stacks";
  // Collecting waits for the daemons: the engine's deadline plus a margin.
  const double wait_s = collect ? f.deadline_s + 10 : 10;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  if (!token.empty()) ctx.AddMetadata(kTokenMetadataKey, token);
  xpu::v1::HangRequest req;
  req.set_job(f.job);
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
      err << "xpu " << f.command << ": the engine at " << engine << " has no hang diagnosis\n";
      return kExitNotAvailable;
    }
    err << "xpu " << f.command << ": engine at " << engine << " answered: " << st.error_message()
        << "\n";
    return kExitEngineError;
  }
  if (!r.found()) {
    if (f.json) {
      out << "{\"job\":\"" << f.job << "\",\"found\":false}\n";
    } else {
      out << "no hang diagnosed for job " << f.job << "\n";
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
  if (f.json) {
    // {"found":true, ...the report's fields}
    const std::string& j = r.report_json();
    out << "{\"found\":true" << (j.size() > 2 ? "," + j.substr(1) : "}") << "\n";
  } else {
    out << r.text();
  }
  return kExitOk;
}

}  // namespace xpu::cli
