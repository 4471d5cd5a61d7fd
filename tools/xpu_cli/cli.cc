#include "tools/xpu_cli/cli.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tools/xpu_cli/calibrate_cli.h"
#include "tools/xpu_cli/connection.h"
#include "tools/xpu_cli/hang_cli.h"
#include "tools/xpu_cli/json_writer.h"
#include "tools/xpu_cli/profile_cli.h"
#include "tools/xpu_cli/timeline_cli.h"
#include "xpu/v1/xpu.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr auto kDeadline = std::chrono::seconds(5);

const char kUsage[] = R"(xpu: query the XPUTimer engine.

Usage: xpu [global flags] <command> [command flags]

Commands:
  status               engine, daemons and running jobs
  jobs [--all]         jobs (with --all: finished and earlier jobs from history)
  ranks --job JOB      ranks of a job: liveness, record counts, drops
  diagnose --job JOB [--all]
                       diagnoses of a job (with --all: resolved ones too)
  report --job JOB     readable slowdown report: job, ranks, diagnoses by team
  timeline dump|summary --job JOB ...
                       on-demand timelines: Perfetto / Chrome traces, summary
                       (see xpu timeline --help)
  hang --job JOB       latest hang diagnosis: class, culprit ranks, merged stacks
  stacks --job JOB     collect and merge the live stacks of every rank now
                       (see xpu hang --help)
  profile --job JOB [--seconds S] [--last]
                       profiling window on every rank now (or the latest
                       result): abnormal functions on abnormal ranks
                       (see xpu profile --help)
  calibrate            measure this node's GPUs (GEMM peak, collective busbw) and
                       store the result in the engine per GPU model
                       (see xpu calibrate --help)
  run                  not available in this version

Global flags (also accepted after the command):
  --engine HOST:PORT   engine address (default $XPU_ENGINE or 127.0.0.1:7441)
  --json               machine-readable output (stable field names, see `xpu <cmd> --help`)
  --tls                connect with TLS (system roots unless --tls-ca)
  --tls-ca PATH        CA certificate to verify the engine (implies --tls)
  --tls-cert PATH      client certificate (with --tls-key) for engines that require one
  --tls-key PATH       client private key
  --token-file PATH    shared token, when the engine was started with --token-file
  --help               this text; `xpu <command> --help` for a command

Exit codes: 0 ok, 1 engine error, 2 engine unreachable, 3 not available, 64 usage.
)";

const std::map<std::string, std::string>& CommandHelp() {
  static const auto* help = new std::map<std::string, std::string>{
      {"status", R"(xpu status [--json]

Engine identity and uptime, connected daemons, running jobs.
JSON: {engine_id, version, uptime_s, records_total, rejected_total,
       daemons: [{daemon_id, host, connected, last_seen_ns, batches, records, records_dropped}],
       jobs: [{job, job_name, state, ranks, ranks_alive, records, first_seen_ns, last_seen_ns}]}
)"},
      {"jobs", R"(xpu jobs [--all] [--json]

Jobs known to the engine. Without --all only jobs that are not finished;
with --all also finished jobs and jobs from earlier engine runs (history).
JSON: {jobs: [{job, job_name, state, ranks, ranks_alive, records, first_seen_ns, last_seen_ns}]}
)"},
      {"diagnose", R"(xpu diagnose --job JOB [--all] [--json]

What the engine's detectors found about a job: kind, team (operations /
infrastructure / algorithm), severity, ranks, hosts, first and last seen,
and the evidence (figures and the comparison made). Active diagnoses only;
with --all also resolved ones. Kinds: docs/diagnosis-catalogue.md.
JSON: {job, diagnoses: [{kind, subject, team, severity, active, ranks: [int],
       hosts: [str], evidence, first_seen_ns, last_seen_ns, resolved_ns}]}
)"},
      {"report", R"(xpu report --job JOB [--json]

A readable slowdown report: the job and its ranks, then the active
diagnoses grouped by the team that can act on them, then resolved ones.
JSON: {job, job_name, state, ranks, ranks_alive, records,
       diagnoses: [as in xpu diagnose --json]}
)"},
      {"ranks", R"(xpu ranks --job JOB [--json]

Processes of one job: rank, host, pid, liveness (alive/silent/exited),
records received, records dropped before the engine, signatures.
JSON: {job, ranks: [{rank, host, pid, local_rank, liveness, records, dropped,
       signatures, last_record_ns, last_seen_ns}]}
)"},
  };
  return *help;
}

const char* const kLaterCommands[] = {"run"};

struct Flags {
  std::string engine;
  bool json = false;
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, token_file;
  bool help = false;
  bool all = false;
  std::string job;
  std::string command;
};

// Parses flags anywhere on the line; the first non-flag word is the command.
bool ParseArgs(const std::vector<std::string>& args, Flags* f, std::string* error) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_inline = false;
    if (absl::StartsWith(a, "--")) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        has_inline = true;
      }
    }
    auto take = [&](std::string* out) {
      if (has_inline) {
        *out = value;
        return true;
      }
      if (i + 1 >= args.size()) {
        *error = a + " needs a value";
        return false;
      }
      *out = args[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      f->help = true;
    } else if (a == "--json") {
      f->json = true;
    } else if (a == "--all") {
      f->all = true;
    } else if (a == "--tls") {
      f->tls = true;
    } else if (IsConnectionValueFlag(a)) {
      std::string v;
      if (!take(&v)) return false;
      SetConnectionFlag(a, v, f);
    } else if (a == "--job") {
      if (!take(&f->job)) return false;
    } else if (absl::StartsWith(a, "-")) {
      *error = "unknown flag " + a;
      return false;
    } else if (f->command.empty()) {
      f->command = a;
    } else {
      *error = "unexpected argument '" + a + "'";
      return false;
    }
  }
  return true;
}

std::string FormatAge(uint64_t ns, uint64_t now_ns) {
  if (ns == 0) return "-";
  if (ns > now_ns) return "0s";
  uint64_t s = (now_ns - ns) / 1000000000ull;
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  return absl::StrCat(s / 3600, "h");
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Left-aligned text table.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

void JobJson(JsonWriter& w, const xpu::v1::JobInfo& j) {
  w.BeginObject()
      .Field("job", j.job())
      .Field("job_name", j.job_name())
      .Field("state", j.state())
      .Field("ranks", j.ranks())
      .Field("ranks_alive", j.ranks_alive())
      .Field("records", j.records())
      .Field("first_seen_ns", j.first_seen_ns())
      .Field("last_seen_ns", j.last_seen_ns())
      .EndObject();
}

std::vector<std::vector<std::string>> JobRows(
    const google::protobuf::RepeatedPtrField<xpu::v1::JobInfo>& jobs) {
  uint64_t now = NowNs();
  std::vector<std::vector<std::string>> rows = {
      {"JOB", "NAME", "STATE", "RANKS", "ALIVE", "RECORDS", "LAST SEEN"}};
  for (const auto& j : jobs) {
    rows.push_back({j.job(), j.job_name().empty() ? "-" : j.job_name(), j.state(),
                    std::to_string(j.ranks()), std::to_string(j.ranks_alive()),
                    std::to_string(j.records()), FormatAge(j.last_seen_ns(), now) + " ago"});
  }
  return rows;
}

}  // namespace

std::string StatusJson(const xpu::v1::StatusReply& r) {
  JsonWriter w;
  w.BeginObject()
      .Field("engine_id", r.engine_id())
      .Field("version", r.version())
      .Field("uptime_s", r.uptime_s())
      .Field("records_total", r.records_total())
      .Field("rejected_total", r.rejected_total());
  w.BeginArray("daemons");
  for (const auto& d : r.daemons()) {
    w.BeginObject()
        .Field("daemon_id", d.daemon_id())
        .Field("host", d.host())
        .Field("connected", d.connected())
        .Field("last_seen_ns", d.last_seen_ns())
        .Field("batches", d.batches())
        .Field("records", d.records())
        .Field("records_dropped", d.records_dropped())
        .EndObject();
  }
  w.EndArray().BeginArray("jobs");
  for (const auto& j : r.jobs()) JobJson(w, j);
  w.EndArray().EndObject();
  return w.str() + "\n";
}

std::string JobsJson(const xpu::v1::JobsReply& r) {
  JsonWriter w;
  w.BeginObject().BeginArray("jobs");
  for (const auto& j : r.jobs()) JobJson(w, j);
  w.EndArray().EndObject();
  return w.str() + "\n";
}

std::string RanksJson(const xpu::v1::RanksReply& r) {
  JsonWriter w;
  w.BeginObject().Field("job", r.job()).BeginArray("ranks");
  for (const auto& k : r.ranks()) {
    w.BeginObject()
        .Field("rank", k.rank())
        .Field("host", k.host())
        .Field("pid", k.pid())
        .Field("local_rank", k.local_rank())
        .Field("liveness", k.liveness())
        .Field("records", k.records())
        .Field("dropped", k.dropped())
        .Field("signatures", k.signatures())
        .Field("last_record_ns", k.last_record_ns())
        .Field("last_seen_ns", k.last_seen_ns())
        .EndObject();
  }
  w.EndArray().EndObject();
  return w.str() + "\n";
}

std::string StatusTable(const xpu::v1::StatusReply& r) {
  uint64_t now = NowNs();
  std::string out = absl::StrCat("engine   ", r.engine_id(), " (version ", r.version(), ", up ",
                                 r.uptime_s(), " s)\nrecords  ", r.records_total(), " received, ",
                                 r.rejected_total(), " messages rejected\n\n");
  std::vector<std::vector<std::string>> rows = {
      {"DAEMON", "HOST", "CONNECTED", "BATCHES", "RECORDS", "DROPPED", "LAST SEEN"}};
  for (const auto& d : r.daemons()) {
    rows.push_back({d.daemon_id(), d.host(), d.connected() ? "yes" : "no",
                    std::to_string(d.batches()), std::to_string(d.records()),
                    std::to_string(d.records_dropped()),
                    FormatAge(d.last_seen_ns(), now) + " ago"});
  }
  out += r.daemons().empty() ? "no daemons\n" : Table(rows);
  out += "\n";
  out += r.jobs().empty() ? "no running jobs\n" : Table(JobRows(r.jobs()));
  return out;
}

std::string JobsTable(const xpu::v1::JobsReply& r) {
  return r.jobs().empty() ? "no jobs\n" : Table(JobRows(r.jobs()));
}

std::string RanksTable(const xpu::v1::RanksReply& r) {
  uint64_t now = NowNs();
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "HOST", "PID", "LIVENESS", "RECORDS", "DROPPED", "SIGS", "LAST RECORD"}};
  for (const auto& k : r.ranks()) {
    rows.push_back({k.rank() >= 0 ? std::to_string(k.rank()) : "-", k.host(),
                    std::to_string(k.pid()), k.liveness(), std::to_string(k.records()),
                    std::to_string(k.dropped()), std::to_string(k.signatures()),
                    FormatAge(k.last_record_ns(), now) + " ago"});
  }
  return absl::StrCat("job ", r.job(), "\n", Table(rows));
}

namespace {

void DiagnosisJson(JsonWriter& w, const xpu::v1::DiagnosisInfo& d) {
  w.BeginObject()
      .Field("kind", d.kind())
      .Field("subject", d.subject())
      .Field("team", d.team())
      .Field("severity", d.severity())
      .Field("active", d.active());
  w.BeginArray("ranks");
  for (int32_t r : d.ranks()) w.Field("", r);
  w.EndArray().BeginArray("hosts");
  for (const std::string& h : d.hosts()) w.Field("", h);
  w.EndArray()
      .Field("evidence", d.evidence())
      .Field("first_seen_ns", d.first_seen_ns())
      .Field("last_seen_ns", d.last_seen_ns())
      .Field("resolved_ns", d.resolved_ns())
      .EndObject();
}

std::string RankList(const xpu::v1::DiagnosisInfo& d) {
  if (d.ranks().empty()) return "-";
  std::string s;
  for (int i = 0; i < d.ranks_size(); ++i) absl::StrAppend(&s, i ? "," : "", d.ranks(i));
  return s;
}

// Word-wraps `text` at `width` columns with `indent` before every line.
std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

}  // namespace

std::string DiagnosesJson(const xpu::v1::DiagnosesReply& r) {
  JsonWriter w;
  w.BeginObject().Field("job", r.job()).BeginArray("diagnoses");
  for (const auto& d : r.diagnoses()) DiagnosisJson(w, d);
  w.EndArray().EndObject();
  return w.str() + "\n";
}

std::string DiagnosesTable(const xpu::v1::DiagnosesReply& r) {
  if (r.diagnoses().empty()) return absl::StrCat("job ", r.job(), ": no diagnoses\n");
  uint64_t now = NowNs();
  std::string out = absl::StrCat("job ", r.job(), "\n");
  std::vector<std::vector<std::string>> rows = {
      {"KIND", "TEAM", "SEVERITY", "STATE", "RANKS", "FIRST SEEN", "LAST SEEN"}};
  for (const auto& d : r.diagnoses()) {
    rows.push_back({d.kind(), d.team(), d.severity(), d.active() ? "active" : "resolved",
                    RankList(d), FormatAge(d.first_seen_ns(), now) + " ago",
                    FormatAge(d.last_seen_ns(), now) + " ago"});
  }
  out += Table(rows);
  out += "\n";
  for (const auto& d : r.diagnoses()) {
    out += absl::StrCat(d.kind(), " (", d.subject(), "):\n");
    out += Wrap(d.evidence(), 100, "  ");
  }
  return out;
}

std::string ReportText(const xpu::v1::JobInfo& job, const xpu::v1::RanksReply& ranks,
                       const xpu::v1::DiagnosesReply& diags) {
  uint64_t now = NowNs();
  std::string out =
      absl::StrCat("XPUTimer slowdown report for job ", job.job(),
                   job.job_name().empty() ? "" : absl::StrCat(" (", job.job_name(), ")"), "\n");
  std::map<std::string, int> hosts;
  for (const auto& k : ranks.ranks()) hosts[k.host()]++;
  absl::StrAppend(&out, "state ", job.state(), ", ", job.ranks_alive(), " of ", job.ranks(),
                  " ranks alive on ", hosts.size(), " host(s), ", job.records(),
                  " records, last seen ", FormatAge(job.last_seen_ns(), now), " ago\n\n");
  int active = 0;
  for (const auto& d : diags.diagnoses()) active += d.active();
  if (active == 0) {
    out += "No active diagnosis: no slowdown detected.\n";
  }
  for (const char* team : {"operations", "infrastructure", "algorithm"}) {
    std::string section;
    for (const auto& d : diags.diagnoses()) {
      if (!d.active() || d.team() != team) continue;
      std::string hl;
      for (int i = 0; i < d.hosts_size(); ++i) absl::StrAppend(&hl, i ? "," : "", d.hosts(i));
      absl::StrAppend(&section, "  * ", d.kind(), " [", d.severity(), "] ranks ", RankList(d),
                      hl.empty() ? "" : absl::StrCat(" on ", hl), "; since ",
                      FormatAge(d.first_seen_ns(), now), " ago, last seen ",
                      FormatAge(d.last_seen_ns(), now), " ago\n");
      section += Wrap(d.evidence(), 96, "      ");
    }
    if (!section.empty()) absl::StrAppend(&out, "For the ", team, " team:\n", section, "\n");
  }
  std::string resolved;
  for (const auto& d : diags.diagnoses()) {
    if (d.active()) continue;
    absl::StrAppend(&resolved, "  - ", d.kind(), " (", d.subject(), ", ", d.team(), "), resolved ",
                    FormatAge(d.resolved_ns(), now), " ago\n");
  }
  if (!resolved.empty()) absl::StrAppend(&out, "Resolved:\n", resolved);
  return out;
}

namespace {

// `xpu report`: the job, its ranks and every diagnosis, active and resolved.
// Three calls, each with its own context (a context serves one call): `ctx`
// for the first. `fail` turns an engine error into the exit code.
int RunReport(xpu::v1::Query::Stub& stub, grpc::ClientContext& ctx, const Flags& f,
              const std::string& token, const std::function<int(const grpc::Status&)>& fail,
              std::ostream& out) {
  xpu::v1::DiagnosesRequest dreq;
  dreq.set_job(f.job);
  dreq.set_include_resolved(true);
  xpu::v1::DiagnosesReply diags;
  grpc::Status st = stub.Diagnoses(&ctx, dreq, &diags);
  if (!st.ok()) return fail(st);
  auto call_ctx = [&](grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + kDeadline);
    if (!token.empty()) c->AddMetadata(kTokenMetadataKey, token);
  };
  grpc::ClientContext jctx, rctx;
  call_ctx(&jctx);
  call_ctx(&rctx);
  xpu::v1::JobsRequest jreq;
  jreq.set_include_finished(true);
  xpu::v1::JobsReply jobs;
  if (st = stub.Jobs(&jctx, jreq, &jobs); !st.ok()) return fail(st);
  xpu::v1::JobInfo info;
  info.set_job(f.job);
  info.set_state("unknown");
  for (const auto& j : jobs.jobs()) {
    if (j.job() == f.job) info = j;
  }
  xpu::v1::RanksRequest rreq;
  rreq.set_job(f.job);
  xpu::v1::RanksReply ranks;
  st = stub.Ranks(&rctx, rreq, &ranks);
  if (!st.ok() && st.error_code() != grpc::StatusCode::NOT_FOUND) return fail(st);
  if (f.json) {
    JsonWriter w;
    w.BeginObject()
        .Field("job", info.job())
        .Field("job_name", info.job_name())
        .Field("state", info.state())
        .Field("ranks", info.ranks())
        .Field("ranks_alive", info.ranks_alive())
        .Field("records", info.records())
        .BeginArray("diagnoses");
    for (const auto& d : diags.diagnoses()) DiagnosisJson(w, d);
    w.EndArray().EndObject();
    out << w.str() << "\n";
  } else {
    out << ReportText(info, ranks, diags);
  }
  return kExitOk;
}

}  // namespace

int RunCli(const std::vector<std::string>& args, const std::string& env_engine, std::ostream& out,
           std::ostream& err) {
  // `hang` and `stacks` (hang_cli.cc), `timeline` (timeline_cli.cc) have
  // their own flags.
  if (IsHangCommand(args)) return RunHangCli(args, env_engine, out, err);
  if (IsProfileCommand(args)) return RunProfileCli(args, env_engine, out, err);
  if (IsTimelineCommand(args)) return RunTimelineCli(args, env_engine, out, err);
  if (IsCalibrateCommand(args)) return RunCalibrateCli(args, env_engine, out, err);
  Flags f;
  std::string error;
  if (!ParseArgs(args, &f, &error)) {
    err << "xpu: " << error << " (see xpu --help)\n";
    return kExitUsage;
  }
  if (f.command.empty()) {
    if (f.help) {
      out << kUsage;
      return kExitOk;
    }
    err << kUsage;
    return kExitUsage;
  }
  for (const char* later : kLaterCommands) {
    if (f.command == later) {
      err << "xpu " << f.command << ": not available in this version\n";
      return kExitNotAvailable;
    }
  }
  auto help = CommandHelp().find(f.command);
  if (help == CommandHelp().end()) {
    err << "xpu: unknown command '" << f.command << "' (see xpu --help)\n";
    return kExitUsage;
  }
  if (f.help) {
    out << help->second;
    return kExitOk;
  }
  if ((f.command == "ranks" || f.command == "diagnose" || f.command == "report") && f.job.empty()) {
    err << "xpu " << f.command << ": --job JOB is required\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(ConnectionFlagsOf(f), env_engine, &conn, err)) return kExitUsage;
  const std::string& engine = conn.address;
  const std::shared_ptr<grpc::ChannelCredentials>& creds = conn.credentials;
  const std::string& token = conn.token;
  auto stub = xpu::v1::Query::NewStub(grpc::CreateChannel(engine, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  if (!token.empty()) ctx.AddMetadata(kTokenMetadataKey, token);

  auto fail = [&](const grpc::Status& st) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      err << "cannot reach engine at " << engine << ": " << st.error_message() << "\n";
      return kExitUnreachable;
    }
    err << "xpu " << f.command << ": engine at " << engine << " answered: " << st.error_message()
        << "\n";
    return kExitEngineError;
  };
  if (f.command == "status") {
    xpu::v1::StatusReply r;
    grpc::Status st = stub->Status(&ctx, xpu::v1::StatusRequest(), &r);
    if (!st.ok()) return fail(st);
    out << (f.json ? StatusJson(r) : StatusTable(r));
  } else if (f.command == "jobs") {
    xpu::v1::JobsRequest req;
    req.set_include_finished(f.all);
    xpu::v1::JobsReply r;
    grpc::Status st = stub->Jobs(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (f.json ? JobsJson(r) : JobsTable(r));
  } else if (f.command == "ranks") {
    xpu::v1::RanksRequest req;
    req.set_job(f.job);
    xpu::v1::RanksReply r;
    grpc::Status st = stub->Ranks(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (f.json ? RanksJson(r) : RanksTable(r));
  } else if (f.command == "diagnose") {
    xpu::v1::DiagnosesRequest req;
    req.set_job(f.job);
    req.set_include_resolved(f.all);
    xpu::v1::DiagnosesReply r;
    grpc::Status st = stub->Diagnoses(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (f.json ? DiagnosesJson(r) : DiagnosesTable(r));
  } else if (f.command == "report") {
    return RunReport(*stub, ctx, f, token, fail, out);
  }
  return kExitOk;
}

}  // namespace xpu::cli
