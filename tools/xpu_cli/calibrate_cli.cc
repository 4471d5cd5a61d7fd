// calibrate_cli.cc — `xpu calibrate` (command.h). Exit
// codes as in cli.h.
//
//   xpu calibrate [xpu-calibrate flags] [--no-upload] [--json]
//       runs xpu-calibrate (GEMM peak per dtype, collective busbw per size on
//       this node's GPUs; its flags are passed through, see
//       xpu-calibrate --help), then uploads the report to the engine
//       (History.UploadCalibration), which stores it per GPU model for the
//       detectors. The CLI itself loads no CUDA library: xpu-calibrate does,
//       at run time. It is found as $XPU_CALIBRATE, next to `xpu`, in
//       ../calibrate/ (build tree), then on PATH.
//   xpu calibrate --from FILE
//       uploads a report written earlier by `xpu-calibrate --out FILE` (a
//       node without a route to the engine).
//   xpu calibrate --show [--gpu-model M]
//       the calibrations the engine has stored.
// Common: --engine ADDR ($XPU_ENGINE), --token-file F, --tls, --tls-ca F,
// --tls-cert F, --tls-key F.
// --json: {engine, gpu_model, host, gemm_rows, collective_rows, report} after
// an upload (report: calibrate::CalibrationJson, the CalibrationReport with
// its proto field names); with --show
// {reports: [...]}.
#include <grpcpp/grpcpp.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json/json.h"
#include "tools/calibrate/report.h"
#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/command.h"
#include "xpu/v1/history.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr auto kUploadDeadline = std::chrono::seconds(30);

struct CalibrateFlags {
  std::string from, gpu_model, out;
  bool no_upload = false, show = false;
  std::vector<std::string> forward;  // to xpu-calibrate
};

// Where xpu-calibrate is: see the top of this file.
std::string CalibrateBinary() {
  if (const char* e = std::getenv("XPU_CALIBRATE"); e != nullptr && *e != '\0') return e;
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    for (const std::string& c : {dir + "/xpu-calibrate", dir + "/../calibrate/xpu-calibrate"}) {
      if (access(c.c_str(), X_OK) == 0) return c;
    }
  }
  return "xpu-calibrate";  // PATH
}

// Runs xpu-calibrate with `args`; its stdout goes to our stderr when
// `quiet_stdout` (JSON mode keeps stdout for the result). Returns its exit
// status, 127 when it could not be started.
int RunTool(const std::string& path, const std::vector<std::string>& args, bool quiet_stdout) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    if (quiet_stdout) dup2(STDERR_FILENO, STDOUT_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int ReportRpcError(const grpc::Status& st, const std::string& address, std::ostream& err) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    err << "xpu: cannot reach engine at " << address << ": " << st.error_message() << "\n";
    return kExitUnreachable;
  }
  if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    err << "xpu calibrate: the engine at " << address
        << " does not store calibrations (older version)\n";
    return kExitNotAvailable;
  }
  err << "xpu calibrate: " << st.error_message() << "\n";
  return kExitEngineError;
}

int RunCalibrate(const CalibrateFlags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  const CommonFlags& c = in.common;
  if (f.show + !f.from.empty() + f.no_upload > 1) {
    err << "xpu calibrate: --show, --from and --no-upload exclude each other\n";
    return kExitUsage;
  }
  if ((f.show || !f.from.empty()) && !f.forward.empty()) {
    err << "xpu calibrate: unexpected " << f.forward[0] << " with --show / --from\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(c.connection, in.env_engine, &conn, err)) return kExitUsage;
  auto context = [&](grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + kUploadDeadline);
    if (!conn.token.empty()) ctx->AddMetadata(kTokenMetadataKey, conn.token);
  };
  auto stub = [&] {
    return xpu::v1::History::NewStub(grpc::CreateChannel(conn.address, conn.credentials));
  };

  if (f.show) {
    xpu::v1::CalibrationsRequest req;
    req.set_gpu_model(f.gpu_model);
    xpu::v1::CalibrationsReply reply;
    grpc::ClientContext ctx;
    context(&ctx);
    grpc::Status st = stub()->Calibrations(&ctx, req, &reply);
    if (!st.ok()) return ReportRpcError(st, conn.address, err);
    if (c.json) {
      json::Json reports = json::Json::array();
      for (const auto& r : reply.reports()) reports.push_back(calibrate::CalibrationJson(r));
      out << json::Dump(json::Json{{"reports", std::move(reports)}}) << "\n";
    } else if (reply.reports_size() == 0) {
      out << "no calibration stored" << (f.gpu_model.empty() ? "" : " for " + f.gpu_model) << "\n";
    } else {
      for (const auto& r : reply.reports()) out << calibrate::CalibrationTable(r) << "\n";
    }
    return kExitOk;
  }

  xpu::v1::CalibrationReport report;
  std::string report_path = f.from;
  if (report_path.empty()) {
    std::string tmpl =
        (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
        "/xpu-calibration-XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
      err << "xpu calibrate: cannot create a temporary file in " << tmpl << "\n";
      return kExitEngineError;
    }
    close(fd);
    report_path = tmpl;
    std::vector<std::string> tool_args = f.forward;
    tool_args.push_back("--out");
    tool_args.push_back(report_path);
    const std::string tool = CalibrateBinary();
    const int rc = RunTool(tool, tool_args, c.json);
    if (rc == 127) {
      unlink(report_path.c_str());
      err << "xpu calibrate: cannot run " << tool
          << " (set XPU_CALIBRATE or install xpu-calibrate next to xpu)\n";
      return kExitNotAvailable;
    }
    if (rc != 0) {
      unlink(report_path.c_str());
      err << "xpu calibrate: xpu-calibrate failed (exit " << rc << ")\n";
      return rc == kExitUsage ? kExitUsage : kExitEngineError;
    }
  }
  {
    std::ifstream in(report_path, std::ios::binary);
    if (!in || !report.ParseFromIstream(&in)) {
      err << "xpu calibrate: " << report_path << " is not a calibration report\n";
      return f.from.empty() ? kExitEngineError : kExitUsage;
    }
  }
  if (f.from.empty()) unlink(report_path.c_str());
  if (f.no_upload) {
    if (c.json) out << json::Dump(calibrate::CalibrationJson(report)) << "\n";
    return kExitOk;
  }
  xpu::v1::UploadCalibrationReply reply;
  grpc::ClientContext ctx;
  context(&ctx);
  grpc::Status st = stub()->UploadCalibration(&ctx, report, &reply);
  if (!st.ok()) {
    if (f.from.empty()) {
      // Keep what was measured: it can be uploaded later with --from.
      const std::string keep = report_path + ".pb";
      std::ofstream o(keep, std::ios::binary);
      if (o && report.SerializeToOstream(&o))
        err << "xpu calibrate: report kept in " << keep << "\n";
    }
    return ReportRpcError(st, conn.address, err);
  }
  if (c.json) {
    out << json::Dump(json::Json{{"engine", conn.address},
                                 {"gpu_model", report.gpu_model()},
                                 {"host", report.host()},
                                 {"gemm_rows", reply.gemm_rows()},
                                 {"collective_rows", reply.collective_rows()},
                                 {"report", calibrate::CalibrationJson(report)}})
        << "\n";
  } else {
    out << "stored in the engine at " << conn.address << ": " << reply.gemm_rows()
        << " GEMM dtype(s) and " << reply.collective_rows() << " collective size(s) for '"
        << report.gpu_model() << "' from " << report.host() << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddCalibrateCommand(CLI::App& xpu, CommonFlags* common, CommandTable* table) {
  auto cf = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = xpu.add_subcommand(
      "calibrate",
      "measure this node's GPUs (GEMM peak, collective busbw) and store the result in the engine "
      "per GPU model");
  AddCommonOptions(cmd, common, /*with_job=*/false);
  cmd->add_flag("--no-upload", cf->no_upload, "measure and print only");
  cmd->add_option("--from", cf->from, "upload a report written by `xpu-calibrate --out FILE`")
      ->type_name("FILE");
  cmd->add_flag("--show", cf->show, "list the engine's stored calibrations");
  cmd->add_option("--gpu-model", cf->gpu_model, "with --show: one GPU model only")->type_name("M");
  // xpu calibrate picks the report file itself.
  cmd->add_option("--out", cf->out)
      ->group("")
      ->check(CLI::Validator(
          [](std::string&) {
            return std::string(
                "is chosen by xpu calibrate; run xpu-calibrate --out FILE to keep a report");
          },
          ""));
  // Everything else goes to xpu-calibrate, e.g. --lib-dir DIR.
  cmd->allow_extras();
  cmd->footer(
      "Measures this node's GPUs with xpu-calibrate (GEMM peak TFLOPS per dtype, collective "
      "busbw per size across all local GPUs) and stores the result in the engine per GPU model; "
      "the detectors then use it as the reference (unoptimized_gemm: calibrated peak per dtype; "
      "slow_link: calibrated busbw per op, size and communicator shape). Options other than the "
      "ones above go to xpu-calibrate, e.g. --lib-dir DIR (CUDA libraries, or a PyTorch "
      "virtualenv's site-packages/nvidia), --dtypes, --gemm-size, --sizes, --ops, --devices; see "
      "`xpu-calibrate --help`.\n"
      "  xpu calibrate [xpu-calibrate options] [--no-upload] [--json]\n"
      "  xpu calibrate --from FILE [--json]\n"
      "  xpu calibrate --show [--gpu-model M] [--json]\n"
      "xpu-calibrate is $XPU_CALIBRATE, else next to `xpu`, else on PATH.\n"
      "JSON: {engine, gpu_model, host, gemm_rows, collective_rows, report} (report: "
      "tools/calibrate/report.h, snake_case); --show: {reports: [...]}.");
  (*table)[cmd] = [cf, cmd](const Invocation& in) {
    cf->forward = cmd->remaining();
    return RunCalibrate(*cf, in);
  };
}

}  // namespace xpu::cli
