// calibrate_cli — `xpu calibrate`, dispatched from RunCli (cli.cc). Exit
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
// an upload (report: the CalibrationReport in protobuf JSON); with --show
// {reports: [...]}.
#ifndef XPU_TOOLS_XPU_CLI_CALIBRATE_CLI_H_
#define XPU_TOOLS_XPU_CLI_CALIBRATE_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace xpu::cli {

// True when the command word of `args` is "calibrate".
bool IsCalibrateCommand(const std::vector<std::string>& args);
int RunCalibrateCli(const std::vector<std::string>& args, const std::string& env_engine,
                    std::ostream& out, std::ostream& err);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_CALIBRATE_CLI_H_
