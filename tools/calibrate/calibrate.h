// calibrate — xpu-calibrate as a library: command-line options, the run
// (GEMM peak per dtype on every local GPU, collective busbw per size across
// all of them), the report (xpu.v1.CalibrationReport) and its table.
//
// The report is what the engine stores per GPU model (History.UploadCalibration,
// done by `xpu calibrate`, tools/xpu_cli/calibrate_cli.cc); xpu-calibrate
// itself only measures, prints and writes --out, so it needs no engine and
// no gRPC connection.
// Thread-safety: single-threaded tool code.
#ifndef XPU_TOOLS_CALIBRATE_CALIBRATE_H_
#define XPU_TOOLS_CALIBRATE_CALIBRATE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/calibrate/report.h"
#include "xpu/v1/history.pb.h"

namespace xpu::calibrate {

struct CalibrateOptions {
  std::vector<std::string> lib_dirs;
  std::vector<std::string> dtypes = {"bf16", "fp16", "tf32", "fp32", "fp8"};
  uint32_t gemm_size = 8192;
  int gemm_warmup = 10;
  int gemm_iters = 50;
  std::vector<std::string> ops = {"allreduce", "allgather", "reducescatter"};
  std::vector<uint64_t> sizes;  // default: 1 MiB .. 1 GiB, powers of 4
  int coll_warmup = 5;
  int coll_iters = 20;
  int devices = 0;  // 0: every visible GPU
  bool gemm = true;
  bool collectives = true;
  std::string out;  // write the report (binary protobuf) here
  bool json = false;
  bool help = false;     // --help: CalibrateUsage() is the text
  bool version = false;  // --version
};

// The --help text: every option, its meaning and its default.
std::string CalibrateUsage();

// Parses xpu-calibrate's arguments (argv without argv[0]).
absl::StatusOr<CalibrateOptions> ParseCalibrateArgs(const std::vector<std::string>& args);
// "1M", "4MiB", "1G", "65536" -> bytes.
absl::StatusOr<uint64_t> ParseSize(const std::string& s);
// 1 MiB .. 1 GiB by powers of 4.
std::vector<uint64_t> DefaultSizes();

// Measures; progress lines go to `log`. Fails when nothing could be measured.
absl::StatusOr<xpu::v1::CalibrationReport> RunCalibration(const CalibrateOptions& o,
                                                          std::ostream& log);

// main() in a function: returns the exit code (0 ok, 1 failure, 64 usage).
int CalibrateMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace xpu::calibrate

#endif  // XPU_TOOLS_CALIBRATE_CALIBRATE_H_
