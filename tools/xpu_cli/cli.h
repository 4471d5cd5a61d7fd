// cli — the `xpu` command-line tool, as a library so tests can drive it.
//
// Exit codes: 0 ok; 1 the engine answered with an error (e.g. unknown job,
// unauthenticated); 2 the engine cannot be reached ("cannot reach engine at
// ADDR: reason", 5 s deadline); 3 the command exists but is not available in
// this version; 64 usage error.
//
// --json output (field names are stable; integers are exact 64-bit values,
// timestamps in ns since the Unix epoch):
//   status: {engine_id, version, uptime_s, records_total, rejected_total,
//            daemons: [{daemon_id, host, connected, last_seen_ns, batches,
//                       records, records_dropped}],
//            jobs: [JOB]}
//   jobs:   {jobs: [JOB]}
//   JOB:    {job, job_name, state, ranks, ranks_alive, records,
//            first_seen_ns, last_seen_ns}
//   ranks:  {job, ranks: [{rank, host, pid, local_rank, liveness, records,
//            dropped, signatures, last_record_ns, last_seen_ns}]}
//   diagnose: {job, diagnoses: [DIAG]}
//   report: {job, job_name, state, ranks, ranks_alive, records, diagnoses: [DIAG]}
//   DIAG:   {kind, subject, team, severity, active, ranks: [int], hosts: [str],
//            evidence, first_seen_ns, last_seen_ns, resolved_ns}
#ifndef XPU_TOOLS_XPU_CLI_CLI_H_
#define XPU_TOOLS_XPU_CLI_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "xpu/v1/query.pb.h"

namespace xpu::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitEngineError = 1;
inline constexpr int kExitUnreachable = 2;
inline constexpr int kExitNotAvailable = 3;
inline constexpr int kExitUsage = 64;

// args excludes argv[0]. env_engine is $XPU_ENGINE (may be empty). The
// command line is parsed with the project's flag conventions
// (common/cli/flags.h): --help and --version, options before or after the
// command word.
int RunCli(const std::vector<std::string>& args, const std::string& env_engine, std::ostream& out,
           std::ostream& err);

// The command `args` names ("timeline" for `--engine E timeline dump`), or
// "" when the line names none. For tests.
std::string ParsedCommand(const std::vector<std::string>& args);

// A report the engine rendered as a JSON object (HangReply.report_json,
// ProfileResult.report_json) with "found": true put first.
std::string FoundReportJson(const std::string& report_json);

// Renderers, exposed for tests.
std::string StatusJson(const xpu::v1::StatusReply& r);
std::string JobsJson(const xpu::v1::JobsReply& r);
std::string RanksJson(const xpu::v1::RanksReply& r);
std::string StatusTable(const xpu::v1::StatusReply& r);
std::string JobsTable(const xpu::v1::JobsReply& r);
std::string RanksTable(const xpu::v1::RanksReply& r);
std::string DiagnosesJson(const xpu::v1::DiagnosesReply& r);
std::string DiagnosesTable(const xpu::v1::DiagnosesReply& r);
std::string ReportText(const xpu::v1::JobInfo& job, const xpu::v1::RanksReply& ranks,
                       const xpu::v1::DiagnosesReply& diags);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_CLI_H_
