// profile_cli.cc — see profile_cli.h.
#include "tools/xpu_cli/profile_cli.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/connection.h"
#include "xpu/ring.h"
#include "xpu/v1/xpu.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr char kProfileUsage[] =
    "xpu profile --job JOB [--seconds S] [--json] [--deadline-s D]\n"
    "    run a profiling window of S seconds (default: the engine's) on every rank of JOB now and\n"
    "    print the differential localization: abnormal functions, ranks, hosts, team\n"
    "xpu profile --job JOB --last [--json]\n"
    "    the latest result (after a throughput regression or on demand), no new window\n"
    "common: --engine ADDR, --token-file F, --tls, --tls-ca F, --tls-cert F, --tls-key F\n";

struct ProfileFlags {
  std::string command, job, engine, token_file, tls_ca, tls_cert, tls_key;
  bool json = false, help = false, tls = false, last = false;
  double seconds = 0;     // 0 = the engine's default
  double deadline_s = 0;  // 0 = window + 30 s
};

bool Parse(const std::vector<std::string>& args, ProfileFlags* f, std::string* error) {
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
    } else if (a == "--seconds") {
      if (!value(&v) ||
          !ParseSeconds(a, v, XPU_PROFILE_MAX_DURATION_MS / 1000.0, &f->seconds, error))
        return false;
    } else if (a == "--deadline-s") {
      if (!value(&v) || !ParseSeconds(a, v, 900, &f->deadline_s, error)) return false;
    } else if (a == "--last") {
      f->last = true;
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

bool IsProfileCommand(const std::vector<std::string>& args) {
  return CommandWord(args, {"--job", "--seconds", "--deadline-s"}) == "profile";
}

int RunProfileCli(const std::vector<std::string>& args, const std::string& env_engine,
                  std::ostream& out, std::ostream& err) {
  ProfileFlags f;
  std::string error;
  if (!Parse(args, &f, &error)) {
    err << "xpu: " << error << " (see xpu profile --help)\n";
    return kExitUsage;
  }
  if (f.help) {
    out << kProfileUsage;
    return kExitOk;
  }
  if (f.job.empty()) {
    err << "xpu profile: --job JOB is required\n";
    return kExitUsage;
  }
  if (f.last && f.seconds > 0) {
    err << "xpu profile: --last starts no window; --seconds does not apply\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(ConnectionFlagsOf(f), env_engine, &conn, err)) return kExitUsage;
  auto stub = xpu::v1::ProfileQuery::NewStub(grpc::CreateChannel(conn.address, conn.credentials));
  grpc::ClientContext ctx;
  xpu::v1::ProfileRequest req;
  req.set_job(f.job);
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
    if (f.json) {
      out << "{\"job\":\"" << f.job << "\",\"found\":false}\n";
    } else {
      out << "no profiling window for job " << f.job << "\n";
    }
    return kExitOk;
  }
  if (f.json) {
    const std::string& j = r.report_json();
    out << "{\"found\":true" << (j.size() > 2 ? "," + j.substr(1) : "}") << "\n";
  } else {
    out << r.text();
  }
  return kExitOk;
}

}  // namespace xpu::cli
