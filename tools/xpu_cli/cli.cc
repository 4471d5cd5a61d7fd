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
#include "common/json/json.h"
#include "tools/xpu_cli/command.h"
#include "tools/xpu_cli/connection.h"
#include "xpu/ring.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr auto kDeadline = std::chrono::seconds(5);

const char kDescription[] = "xpu: query the XPUTimer engine.";

// The commands at a glance, after the generated option and command lists.
const char kFooter[] = R"(In short:
  xpu status
  xpu jobs [--all]
  xpu ranks --job JOB
  xpu diagnose --job JOB [--all]
  xpu report --job JOB
  xpu timeline dump|summary --job JOB ...
  xpu hang --job JOB            xpu stacks --job JOB
  xpu profile --job JOB [--seconds S] [--last]
  xpu calibrate [--show | --from FILE | --no-upload]
Options shown above are also accepted after the command; `xpu <command> --help` explains a
command and its JSON output (--json: stable field names).
Exit codes: 0 ok, 1 engine error, 2 engine unreachable, 3 not available, 64 usage.
)";

const std::map<std::string, std::string>& CommandHelp() {
  static const auto* help = new std::map<std::string, std::string>{
      {"status", R"(xpu status [--json]

Engine identity and uptime, connected daemons, running jobs. Engine
replicas sharing PostgreSQL: this replica, every replica of the database
with its lease and job count, and the jobs this replica serves.
JSON: {engine_id, version, uptime_s, records_total, rejected_total,
       daemons: [{daemon_id, host, connected, last_seen_ns, batches, records, records_dropped}],
       jobs: [{job, job_name, state, ranks, ranks_alive, records, first_seen_ns, last_seen_ns}],
       replica_id, replicas: [{replica_id, address, alive, jobs, heartbeat_ns, version}]
       (the last two with replicas only)}
)"},
      {"jobs", R"(xpu jobs [--all] [--json]

Jobs known to the engine. Without --all only jobs that are not finished;
with --all also finished jobs and jobs from earlier engine runs (history).
JSON: {jobs: [{job, job_name, state, ranks, ranks_alive, records, first_seen_ns, last_seen_ns}]}
)"},
      {"diagnose", R"(xpu diagnose --job JOB [--all] [--json]

What the engine's detectors found about a job: kind, team (operations /
infrastructure / algorithm; triage for a throughput regression whose cause
was not found), severity, ranks, hosts, first and last seen,
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

struct CoreFlags {
  bool all = false;
};

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

json::Json JobJson(const xpu::v1::JobInfo& j) {
  return {{"job", j.job()},
          {"job_name", j.job_name()},
          {"state", j.state()},
          {"ranks", j.ranks()},
          {"ranks_alive", j.ranks_alive()},
          {"records", j.records()},
          {"records_dropped", j.records_dropped()},
          {"owner_uid", j.owner_uid()},
          {"first_seen_ns", j.first_seen_ns()},
          {"last_seen_ns", j.last_seen_ns()},
          {"analysed_until_ns", j.analysed_until_ns()},
          {"records_late", j.records_late()}};
}

json::Json LossJson(const google::protobuf::RepeatedPtrField<xpu::v1::LossCount>& lost) {
  json::Json out = json::Json::object();
  for (const auto& l : lost) out[l.reason()] = l.records();
  return out;
}

std::string LossText(const google::protobuf::RepeatedPtrField<xpu::v1::LossCount>& lost) {
  std::string out;
  for (const auto& l : lost) absl::StrAppend(&out, out.empty() ? "" : ", ", l.reason(), " ", l.records());
  return out;
}

json::Json JobList(const google::protobuf::RepeatedPtrField<xpu::v1::JobInfo>& jobs) {
  json::Json out = json::Json::array();
  for (const auto& j : jobs) out.push_back(JobJson(j));
  return out;
}

std::vector<std::vector<std::string>> JobRows(
    const google::protobuf::RepeatedPtrField<xpu::v1::JobInfo>& jobs) {
  uint64_t now = NowNs();
  std::vector<std::vector<std::string>> rows = {
      {"JOB", "NAME", "STATE", "RANKS", "ALIVE", "RECORDS", "LAST SEEN", "ANALYSED TO"}};
  for (const auto& j : jobs) {
    rows.push_back({j.job(), j.job_name().empty() ? "-" : j.job_name(), j.state(),
                    std::to_string(j.ranks()), std::to_string(j.ranks_alive()),
                    std::to_string(j.records()), FormatAge(j.last_seen_ns(), now) + " ago",
                    j.analysed_until_ns() == 0 ? "-"
                                               : FormatAge(j.analysed_until_ns(), now) + " ago"});
  }
  return rows;
}

}  // namespace

std::string StatusJson(const xpu::v1::StatusReply& r) {
  json::Json daemons = json::Json::array();
  for (const auto& d : r.daemons()) {
    daemons.push_back({{"daemon_id", d.daemon_id()},
                       {"host", d.host()},
                       {"connected", d.connected()},
                       {"last_seen_ns", d.last_seen_ns()},
                       {"batches", d.batches()},
                       {"records", d.records()},
                       {"records_dropped", d.records_dropped()}});
  }
  json::Json out = {{"engine_id", r.engine_id()},
                    {"version", r.version()},
                    {"uptime_s", r.uptime_s()},
                    {"records_total", r.records_total()},
                    {"rejected_total", r.rejected_total()},
                    {"records_dropped_total", r.records_dropped_total()},
                    {"lost", LossJson(r.lost())},
                    {"caller", r.caller()},
                    {"store",
                     {{"degraded", r.store().degraded()},
                      {"error", r.store().error()},
                      {"degraded_since_ns", r.store().degraded_since_ns()},
                      {"write_failures", r.store().write_failures()},
                      {"rows_pending", r.store().rows_pending()},
                      {"rows_dropped", r.store().rows_dropped()}}},
                    {"daemons", std::move(daemons)},
                    {"jobs", JobList(r.jobs())}};
  if (!r.replica_id().empty()) {
    json::Json replicas = json::Json::array();
    for (const auto& x : r.replicas()) {
      replicas.push_back({{"replica_id", x.replica_id()},
                          {"address", x.address()},
                          {"alive", x.alive()},
                          {"jobs", x.jobs()},
                          {"heartbeat_ns", x.heartbeat_ns()},
                          {"version", x.version()}});
    }
    out["replica_id"] = r.replica_id();
    out["replicas"] = std::move(replicas);
  }
  return json::Dump(out) + "\n";
}

std::string JobsJson(const xpu::v1::JobsReply& r) {
  return json::Dump(json::Json{{"jobs", JobList(r.jobs())}}) + "\n";
}

std::string RanksJson(const xpu::v1::RanksReply& r) {
  json::Json ranks = json::Json::array();
  for (const auto& k : r.ranks()) {
    ranks.push_back({{"rank", k.rank()},
                     {"host", k.host()},
                     {"pid", k.pid()},
                     {"local_rank", k.local_rank()},
                     {"liveness", k.liveness()},
                     {"records", k.records()},
                     {"dropped", k.dropped()},
                     {"lost", LossJson(k.lost())},
                     // The hook's own count of what it wrote (ring header).
                     {"written", k.counters().hook_size() > XPU_CNT_RECORDS_WRITTEN
                                     ? k.counters().hook(XPU_CNT_RECORDS_WRITTEN)
                                     : 0},
                     {"replayed", k.counters().records_replayed()},
                     {"resyncs", k.counters().resyncs()},
                     {"signatures", k.signatures()},
                     {"last_record_ns", k.last_record_ns()},
                     {"last_seen_ns", k.last_seen_ns()}});
  }
  return json::Dump(json::Json{{"job", r.job()}, {"ranks", std::move(ranks)}}) + "\n";
}

// `xpu status` lists every daemon up to this many, then sums them up.
constexpr int kStatusDaemonRows = 50;

std::string StatusTable(const xpu::v1::StatusReply& r) {
  uint64_t now = NowNs();
  std::string out = absl::StrCat("engine   ", r.engine_id(), " (version ", r.version(), ", up ",
                                 r.uptime_s(), " s)\nrecords  ", r.records_total(), " received, ",
                                 r.records_dropped_total(), " lost",
                                 r.lost().empty() ? "" : " (" + LossText(r.lost()) + ")", ", ",
                                 r.rejected_total(), " messages rejected\n");
  if (r.store().degraded()) {
    absl::StrAppend(&out, "history  DEGRADED since ", FormatAge(r.store().degraded_since_ns(), now),
                    " ago: ", r.store().error(), " (", r.store().rows_pending(), " rows waiting, ",
                    r.store().rows_dropped(), " dropped)\n");
  } else {
    absl::StrAppend(&out, "history  ok (", r.store().write_failures(), " failed writes so far, ",
                    r.store().rows_dropped(), " rows dropped)\n");
  }
  absl::StrAppend(&out, "caller   ", r.caller(), "\n");
  if (!r.replica_id().empty()) {
    // Engine replicas: the jobs below are the ones this replica serves.
    absl::StrAppend(&out, "replica  ", r.replica_id(), " of ", r.replicas_size(), ":");
    for (const auto& x : r.replicas()) {
      absl::StrAppend(&out, "\n  ", x.replica_id(), " at ", x.address(), ", ",
                      x.alive() ? "lease valid" : "lease expired", ", ", x.jobs(),
                      x.jobs() == 1 ? " job" : " jobs", ", renewed ",
                      FormatAge(x.heartbeat_ns(), now), " ago");
    }
    out += "\n";
  }
  out += "\n";
  std::vector<std::vector<std::string>> rows = {
      {"DAEMON", "HOST", "CONNECTED", "BATCHES", "RECORDS", "DROPPED", "LAST SEEN"}};
  // A cluster's worth of daemons is summed up; the table keeps the
  // disconnected ones and those that lost records (--json lists them all).
  const bool many = r.daemons_size() > kStatusDaemonRows;
  int connected = 0, listed = 0;
  for (const auto& d : r.daemons()) {
    connected += d.connected();
    if (many && ((d.connected() && d.records_dropped() == 0) || listed >= kStatusDaemonRows))
      continue;
    listed++;
    rows.push_back({d.daemon_id(), d.host(), d.connected() ? "yes" : "no",
                    std::to_string(d.batches()), std::to_string(d.records()),
                    std::to_string(d.records_dropped()),
                    FormatAge(d.last_seen_ns(), now) + " ago"});
  }
  if (many) {
    absl::StrAppend(&out, r.daemons_size(), " daemons: ", connected, " connected, ",
                    r.daemons_size() - connected, " not",
                    listed ? absl::StrCat("; the first ", listed,
                                          " disconnected or with lost records:\n")
                           : " (none lost records; --json lists every daemon)\n");
  }
  out += r.daemons().empty() ? "no daemons\n" : (rows.size() > 1 ? Table(rows) : "");
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
  std::string out = absl::StrCat("job ", r.job(), "\n", Table(rows));
  for (const auto& k : r.ranks()) {
    if (!k.lost().empty())
      absl::StrAppend(&out, "rank ", k.rank(), " dropped: ", LossText(k.lost()), "\n");
  }
  return out;
}

namespace {

json::Json DiagnosisJson(const xpu::v1::DiagnosisInfo& d) {
  return {{"kind", d.kind()},
          {"subject", d.subject()},
          {"team", d.team()},
          {"severity", d.severity()},
          {"active", d.active()},
          {"ranks", std::vector<int32_t>(d.ranks().begin(), d.ranks().end())},
          {"hosts", std::vector<std::string>(d.hosts().begin(), d.hosts().end())},
          {"evidence", d.evidence()},
          {"first_seen_ns", d.first_seen_ns()},
          {"last_seen_ns", d.last_seen_ns()},
          {"resolved_ns", d.resolved_ns()}};
}

json::Json DiagnosisList(const xpu::v1::DiagnosesReply& r) {
  json::Json out = json::Json::array();
  for (const auto& d : r.diagnoses()) out.push_back(DiagnosisJson(d));
  return out;
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
  return json::Dump(json::Json{{"job", r.job()}, {"diagnoses", DiagnosisList(r)}}) + "\n";
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
    out += job.state() == "finished" ? "No diagnosis was active when the job ended.\n"
                                     : "No active diagnosis: no slowdown detected.\n";
  } else if (job.state() == "finished") {
    absl::StrAppend(&out, "The job has finished; ", active, active == 1 ? " diagnosis was" : " diagnoses were",
                    " active when it ended:\n\n");
  }
  for (const char* team : {"operations", "infrastructure", "algorithm", "triage"}) {
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

void AddCommonOptions(CLI::App* cmd, CommonFlags* common, bool with_job) {
  AddConnectionOptions(cmd, &common->connection);
  cmd->add_flag("--json", common->json, "machine-readable output (stable field names)");
  if (with_job) {
    cmd->add_option("--job", common->job, "the job (as `xpu jobs` lists it)")->type_name("JOB");
  }
}

std::string FoundReportJson(const std::string& report_json) {
  json::Json out = {{"found", true}};
  const json::Json report = json::Json::parse(report_json, nullptr, /*allow_exceptions=*/false);
  if (report.is_object()) {
    for (const auto& [key, value] : report.items()) out[key] = value;
  }
  return json::Dump(out);
}

namespace {

int RunCore(const std::string& command, const CoreFlags& f, const Invocation& in);

std::string CoreSummary(const std::string& n) {
  if (n == "status") return "engine, daemons and running jobs";
  if (n == "jobs") return "jobs (with --all: finished and earlier jobs from history)";
  if (n == "ranks") return "ranks of a job: liveness, record counts, drops";
  if (n == "diagnose") return "diagnoses of a job (with --all: resolved ones too)";
  return "readable slowdown report: job, ranks, diagnoses by team";
}

// Everything `xpu` parses. `word` catches a word that names no command, so
// that the error can say so.
struct App {
  CLI::App app{kDescription};
  CommonFlags common;
  CoreFlags core;
  std::string word;
  CommandTable table;
  CLI::App* run = nullptr;

  App() {
    flags::Configure(app, "xpu");
    app.require_subcommand(0, 1);
    app.footer(kFooter);
    AddConnectionOptions(&app, &common.connection);
    app.add_flag("--json", common.json, "machine-readable output (see `xpu <command> --help`)");
    app.add_option("--job", common.job)->group("");
    app.add_option("word", word)->group("");
    for (const char* name : {"status", "jobs", "ranks", "diagnose", "report"}) {
      const std::string n = name;
      const std::string& help = CommandHelp().at(n);
      CLI::App* cmd = app.add_subcommand(n, CoreSummary(n));
      AddCommonOptions(cmd, &common, /*with_job=*/n != "status" && n != "jobs");
      if (n == "jobs" || n == "diagnose") {
        cmd->add_flag("--all", core.all,
                      n == "jobs" ? "also finished jobs and jobs from earlier engine runs"
                                  : "also resolved diagnoses");
      }
      cmd->footer(help.substr(help.find("\n\n") + 2));
      table[cmd] = [this, n](const Invocation& in) { return RunCore(n, core, in); };
    }
    AddTimelineCommands(app, &common, &table);
    AddHangCommands(app, &common, &table);
    AddProfileCommand(app, &common, &table);
    AddCalibrateCommand(app, &common, &table);
    run = app.add_subcommand("run", "not available in this version");
    run->allow_extras();
    for (CLI::App* cmd : app.get_subcommands({})) cmd->group("Commands");
  }
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // The innermost command parsed (nullptr for none).
  const CLI::App* Selected() const {
    const CLI::App* a = &app;
    while (true) {
      std::vector<const CLI::App*> subs =
          a->get_subcommands([](const CLI::App* s) { return s->parsed(); });
      if (subs.empty()) return a == &app ? nullptr : a;
      a = subs.front();
    }
  }
};

}  // namespace

std::string ParsedCommand(const std::vector<std::string>& args) {
  App a;
  // A command named with something missing (`timeline` without `dump`) is
  // still that command.
  (void)flags::Parse(a.app, args);
  if (!a.word.empty()) return "";
  const CLI::App* selected = a.Selected();
  if (selected == nullptr) return "";
  while (selected->get_parent() != &a.app) selected = selected->get_parent();
  return selected->get_name();
}

int RunCli(const std::vector<std::string>& args, const std::string& env_engine, std::ostream& out,
           std::ostream& err) {
  App a;
  const flags::ParseResult parsed = flags::Parse(a.app, args);
  switch (parsed.outcome) {
    case flags::Outcome::kHelp:
    case flags::Outcome::kVersion:
      out << parsed.text;
      return kExitOk;
    case flags::Outcome::kError:
      err << parsed.text;
      return kExitUsage;
    case flags::Outcome::kRun:
      break;
  }
  const CLI::App* selected = a.Selected();
  if (!a.word.empty()) {
    err << "xpu: " << (selected == nullptr ? "unknown command '" : "unexpected argument '")
        << a.word << "' (see xpu --help)\n";
    return kExitUsage;
  }
  if (selected == nullptr) {
    err << a.app.help();
    return kExitUsage;
  }
  if (selected == a.run) {
    err << "xpu run: not available in this version\n";
    return kExitNotAvailable;
  }
  auto runner = a.table.find(selected);
  if (runner == a.table.end()) {
    err << a.app.help();
    return kExitUsage;
  }
  return runner->second(Invocation{a.common, env_engine, out, err});
}

namespace {

// `xpu report`: the job, its ranks and every diagnosis, active and resolved.
// Three calls, each with its own context (a context serves one call): `ctx`
// for the first. `fail` turns an engine error into the exit code.
int RunReport(xpu::v1::Query::Stub& stub, grpc::ClientContext& ctx, const CommonFlags& c,
              const std::string& token, const std::function<int(const grpc::Status&)>& fail,
              std::ostream& out) {
  xpu::v1::DiagnosesRequest dreq;
  dreq.set_job(c.job);
  dreq.set_include_resolved(true);
  xpu::v1::DiagnosesReply diags;
  grpc::Status st = stub.Diagnoses(&ctx, dreq, &diags);
  if (!st.ok()) return fail(st);
  auto call_ctx = [&](grpc::ClientContext* cc) {
    cc->set_deadline(std::chrono::system_clock::now() + kDeadline);
    if (!token.empty()) cc->AddMetadata(kTokenMetadataKey, token);
  };
  grpc::ClientContext jctx, rctx;
  call_ctx(&jctx);
  call_ctx(&rctx);
  xpu::v1::JobsRequest jreq;
  jreq.set_include_finished(true);
  xpu::v1::JobsReply jobs;
  if (st = stub.Jobs(&jctx, jreq, &jobs); !st.ok()) return fail(st);
  xpu::v1::JobInfo info;
  info.set_job(c.job);
  info.set_state("unknown");
  for (const auto& j : jobs.jobs()) {
    if (j.job() == c.job) info = j;
  }
  xpu::v1::RanksRequest rreq;
  rreq.set_job(c.job);
  xpu::v1::RanksReply ranks;
  st = stub.Ranks(&rctx, rreq, &ranks);
  if (!st.ok() && st.error_code() != grpc::StatusCode::NOT_FOUND) return fail(st);
  if (c.json) {
    const json::Json o = {{"job", info.job()},
                          {"job_name", info.job_name()},
                          {"state", info.state()},
                          {"ranks", info.ranks()},
                          {"ranks_alive", info.ranks_alive()},
                          {"records", info.records()},
                          {"diagnoses", DiagnosisList(diags)}};
    out << json::Dump(o) << "\n";
  } else {
    out << ReportText(info, ranks, diags);
  }
  return kExitOk;
}

int RunCore(const std::string& command, const CoreFlags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  const CommonFlags& c = in.common;
  if ((command == "ranks" || command == "diagnose" || command == "report") && c.job.empty()) {
    err << "xpu " << command << ": --job JOB is required\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(c.connection, in.env_engine, &conn, err)) return kExitUsage;
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
    err << "xpu " << command << ": engine at " << engine << " answered: " << st.error_message()
        << "\n";
    return kExitEngineError;
  };
  if (command == "status") {
    xpu::v1::StatusReply r;
    grpc::Status st = stub->Status(&ctx, xpu::v1::StatusRequest(), &r);
    if (!st.ok()) return fail(st);
    out << (c.json ? StatusJson(r) : StatusTable(r));
  } else if (command == "jobs") {
    xpu::v1::JobsRequest req;
    req.set_include_finished(f.all);
    xpu::v1::JobsReply r;
    grpc::Status st = stub->Jobs(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (c.json ? JobsJson(r) : JobsTable(r));
  } else if (command == "ranks") {
    xpu::v1::RanksRequest req;
    req.set_job(c.job);
    xpu::v1::RanksReply r;
    grpc::Status st = stub->Ranks(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (c.json ? RanksJson(r) : RanksTable(r));
  } else if (command == "diagnose") {
    xpu::v1::DiagnosesRequest req;
    req.set_job(c.job);
    req.set_include_resolved(f.all);
    xpu::v1::DiagnosesReply r;
    grpc::Status st = stub->Diagnoses(&ctx, req, &r);
    if (!st.ok()) return fail(st);
    out << (c.json ? DiagnosesJson(r) : DiagnosesTable(r));
  } else if (command == "report") {
    return RunReport(*stub, ctx, c, token, fail, out);
  }
  return kExitOk;
}

}  // namespace

}  // namespace xpu::cli
