// calibrate_cli.cc — see calibrate_cli.h.
#include "tools/xpu_cli/calibrate_cli.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/calibrate/report.h"
#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/connection.h"
#include "xpu/v1/xpu.grpc.pb.h"

namespace xpu::cli {
namespace {

constexpr auto kUploadDeadline = std::chrono::seconds(30);

constexpr char kCalibrateHelp[] = R"(xpu calibrate [xpu-calibrate flags] [--no-upload] [--json]
xpu calibrate --from FILE [--json]
xpu calibrate --show [--gpu-model M] [--json]

Measures this node's GPUs with xpu-calibrate (GEMM peak TFLOPS per dtype,
collective busbw per size across all local GPUs) and stores the result in
the engine per GPU model; the detectors then use it as the reference
(unoptimized_gemm: calibrated peak per dtype; slow_link: calibrated busbw
per op, size and communicator shape). Flags other than the ones below go to
xpu-calibrate, e.g. --lib-dir DIR (CUDA libraries, or a PyTorch
virtualenv's site-packages/nvidia), --dtypes, --gemm-size, --sizes, --ops,
--devices; see `xpu-calibrate --help`.

  --no-upload          measure and print only
  --from FILE          upload a report written by `xpu-calibrate --out FILE`
  --show               list the engine's stored calibrations (--gpu-model M: one model)
  --json               machine-readable output
  --engine, --token-file, --tls, --tls-ca, --tls-cert, --tls-key  as for every command

xpu-calibrate is $XPU_CALIBRATE, else next to `xpu`, else on PATH.
)";

struct CalibrateFlags {
  std::string engine, token_file, tls_ca, tls_cert, tls_key, from, gpu_model;
  bool tls = false, json = false, help = false, no_upload = false, show = false;
  std::vector<std::string> forward;  // to xpu-calibrate
};

// Flags of xpu-calibrate that take a value (so that IsCalibrateCommand can
// skip the value when they come before the command word).
constexpr std::string_view kForwardedWithValue[] = {"--lib-dir",    "--dtypes", "--gemm-size",
                                                    "--gemm-iters", "--ops",    "--sizes",
                                                    "--coll-iters", "--devices"};
// Own flags that take a value (the connection flags: connection.h).
constexpr std::string_view kOwnWithValue[] = {"--from", "--gpu-model"};

bool Parse(const std::vector<std::string>& args, CalibrateFlags* f, std::string* error) {
  bool seen_command = false;
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
    if (IsConnectionValueFlag(a)) {
      std::string v;
      if (!value(&v)) return false;
      SetConnectionFlag(a, v, f);
    } else if (a == "--tls") {
      f->tls = true;
    } else if (a == "--from") {
      if (!value(&f->from)) return false;
    } else if (a == "--gpu-model") {
      if (!value(&f->gpu_model)) return false;
    } else if (a == "--json") {
      f->json = true;
    } else if (a == "--help" || a == "-h") {
      f->help = true;
    } else if (a == "--no-upload") {
      f->no_upload = true;
    } else if (a == "--show") {
      f->show = true;
    } else if (a == "--out") {
      *error = "--out is chosen by xpu calibrate; run xpu-calibrate --out FILE to keep a report";
      return false;
    } else if (a == "calibrate" && !seen_command) {
      seen_command = true;
    } else {
      f->forward.push_back(a);
      for (std::string_view w : kForwardedWithValue) {
        if (a == w && i + 1 < args.size()) f->forward.push_back(args[++i]);
      }
    }
  }
  return true;
}

// Where xpu-calibrate is: see calibrate_cli.h.
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

std::string ReportJson(const google::protobuf::Message& m) {
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(m, &json);
  return json;
}

std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
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

}  // namespace

bool IsCalibrateCommand(const std::vector<std::string>& args) {
  std::vector<std::string_view> value_flags(std::begin(kOwnWithValue), std::end(kOwnWithValue));
  value_flags.insert(value_flags.end(), std::begin(kForwardedWithValue),
                     std::end(kForwardedWithValue));
  return CommandWord(args, value_flags) == "calibrate";
}

int RunCalibrateCli(const std::vector<std::string>& args, const std::string& env_engine,
                    std::ostream& out, std::ostream& err) {
  CalibrateFlags f;
  std::string error;
  if (!Parse(args, &f, &error)) {
    err << "xpu calibrate: " << error << " (see xpu calibrate --help)\n";
    return kExitUsage;
  }
  if (f.help) {
    out << kCalibrateHelp;
    return kExitOk;
  }
  if (f.show + !f.from.empty() + f.no_upload > 1) {
    err << "xpu calibrate: --show, --from and --no-upload exclude each other\n";
    return kExitUsage;
  }
  if ((f.show || !f.from.empty()) && !f.forward.empty()) {
    err << "xpu calibrate: unexpected " << f.forward[0] << " with --show / --from\n";
    return kExitUsage;
  }
  EngineConnection conn;
  if (!ResolveConnection(ConnectionFlagsOf(f), env_engine, &conn, err)) return kExitUsage;
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
    if (f.json) {
      out << ReportJson(reply) << "\n";
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
    const int rc = RunTool(tool, tool_args, f.json);
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
    if (f.json) out << ReportJson(report) << "\n";
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
  if (f.json) {
    out << "{\"engine\":" << Quote(conn.address) << ",\"gpu_model\":" << Quote(report.gpu_model())
        << ",\"host\":" << Quote(report.host()) << ",\"gemm_rows\":" << reply.gemm_rows()
        << ",\"collective_rows\":" << reply.collective_rows()
        << ",\"report\":" << ReportJson(report) << "}\n";
  } else {
    out << "stored in the engine at " << conn.address << ": " << reply.gemm_rows()
        << " GEMM dtype(s) and " << reply.collective_rows() << " collective size(s) for '"
        << report.gpu_model() << "' from " << report.host() << "\n";
  }
  return kExitOk;
}

}  // namespace xpu::cli
