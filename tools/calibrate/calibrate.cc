#include "tools/calibrate/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/cli/flags.h"
#include "common/json/json.h"
#include "tools/calibrate/cuda_libs.h"
#include "tools/calibrate/gemm_bench.h"
#include "tools/calibrate/nccl_bench.h"
#include "tools/calibrate/report.h"

namespace xpu::calibrate {

namespace {

std::vector<std::string> List(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipWhitespace())) {
    out.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(p)));
  }
  return out;
}

std::string Hostname() {
  char h[256] = {0};
  gethostname(h, sizeof(h) - 1);
  return h;
}

}  // namespace

std::vector<uint64_t> DefaultSizes() {
  std::vector<uint64_t> out;
  for (uint64_t b = 1ull << 20; b <= 1ull << 30; b *= 4) out.push_back(b);
  return out;
}

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string s = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (absl::EndsWith(s, "IB")) s = s.substr(0, s.size() - 2);
  if (absl::EndsWith(s, "B")) s = s.substr(0, s.size() - 1);
  uint64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
        mult = 1ull << 10;
        break;
      case 'M':
        mult = 1ull << 20;
        break;
      case 'G':
        mult = 1ull << 30;
        break;
      default:
        break;
    }
    if (mult != 1) s.pop_back();
  }
  uint64_t v = 0;
  if (s.empty() || !absl::SimpleAtoi(s, &v) || v == 0 || v > (64ull << 30) / mult) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size '", text, "' (e.g. 1M, 256MiB, 1G, 65536)"));
  }
  return v * mult;
}

namespace {

// Comma-separated lists as typed; checked and converted after parsing.
struct ListArgs {
  std::string dtypes, ops, sizes;
};

void ConfigureCalibrateApp(CLI::App& app, CalibrateOptions* o, ListArgs* lists) {
  flags::Configure(app, "xpu-calibrate");
  app.description(
      "xpu-calibrate: measure what this node's GPUs reach, for XPUTimer's detectors (usually run "
      "as `xpu calibrate`, which uploads the result).\n"
      "\n"
      "Measures, on every visible GPU (CUDA_VISIBLE_DEVICES applies):\n"
      "  * GEMM peak TFLOPS per dtype: a square m = n = k GEMM through cuBLASLt (else cuBLAS), "
      "timed with CUDA events; best and slowest device;\n"
      "  * collective bus bandwidth per size across all GPUs of the node, in one process "
      "(ncclCommInitAll), nccl-tests definitions: algbw = bytes / time, busbw = algbw x "
      "2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter).\n"
      "The CUDA libraries are loaded at run time (no link-time dependency): libcudart.so.13, "
      "libcublasLt.so.13 / libcublas.so.13, libnccl.so.2 from each --lib-dir DIR (DIR/<soname> "
      "and DIR/*/lib/<soname>, so a PyTorch virtualenv's .../site-packages/nvidia works), then "
      "LD_LIBRARY_PATH and the system paths.");
  app.add_option("--lib-dir", o->lib_dirs, "where the CUDA libraries are (repeatable)")
      ->type_name("DIR")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--dtypes", lists->dtypes,
                 "GEMM dtypes, comma-separated (fp8 is skipped below compute capability 8.9)")
      ->type_name("LIST")
      ->default_str("bf16,fp16,tf32,fp32,fp8");
  app.add_option("--gemm-size", o->gemm_size, "m = n = k of the GEMM")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(16));
  app.add_option("--gemm-iters", o->gemm_iters,
                 "timed GEMMs per device and dtype (after " + std::to_string(o->gemm_warmup) +
                     " warm-up ones)")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--ops", lists->ops, "collectives, comma-separated")
      ->type_name("LIST")
      ->default_str("allreduce,allgather,reducescatter");
  app.add_option("--sizes", lists->sizes, "collective sizes, e.g. 1M,16M,256M,1G")
      ->type_name("LIST")
      ->default_str("1 MiB..1 GiB, powers of 4");
  app.add_option(
         "--coll-iters", o->coll_iters,
         "timed iterations per size (after " + std::to_string(o->coll_warmup) + " warm-up ones)")
      ->type_name("N")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_option("--devices", o->devices, "use the first N GPUs")
      ->type_name("N")
      ->default_str("all")
      ->transform(flags::UnsignedAtLeast(1));
  app.add_flag_callback(
      "--no-gemm", [o] { o->gemm = false; }, "skip the GEMM measurement");
  app.add_flag_callback(
      "--no-collectives", [o] { o->collectives = false; }, "skip the collective measurement");
  app.add_option("--out", o->out,
                 "write the report (xpu.v1.CalibrationReport, binary protobuf) to FILE")
      ->type_name("FILE");
  app.add_flag("--json", o->json, "print the report as JSON instead of the table");
  app.footer(
      "Progress goes to stderr, the table (or JSON) to stdout.\n"
      "Exit codes: 0 ok, 1 nothing could be measured or --out failed, 64 usage.");
}

}  // namespace

std::string CalibrateUsage() {
  CLI::App app;
  CalibrateOptions o;
  ListArgs lists;
  ConfigureCalibrateApp(app, &o, &lists);
  return app.help();
}

absl::StatusOr<CalibrateOptions> ParseCalibrateArgs(const std::vector<std::string>& args) {
  CalibrateOptions o;
  ListArgs lists;
  CLI::App app;
  ConfigureCalibrateApp(app, &o, &lists);
  const flags::ParseResult r = flags::Parse(app, args);
  switch (r.outcome) {
    case flags::Outcome::kRun:
      break;
    case flags::Outcome::kHelp:
      o.help = true;
      return o;
    case flags::Outcome::kVersion:
      o.version = true;
      return o;
    case flags::Outcome::kError:
      return absl::InvalidArgumentError(
          absl::StripSuffix(absl::StripPrefix(r.text, "xpu-calibrate: "), "\n"));
  }
  if (!lists.dtypes.empty()) {
    o.dtypes = List(lists.dtypes);
    for (const std::string& d : o.dtypes) {
      if (!KnownGemmDtype(d))
        return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", d, "'"));
    }
  }
  if (!lists.ops.empty()) {
    o.ops = List(lists.ops);
    for (const std::string& op : o.ops) {
      if (!KnownCollective(op))
        return absl::InvalidArgumentError(absl::StrCat("unknown collective '", op, "'"));
    }
  }
  for (const std::string& s : List(lists.sizes)) {
    absl::StatusOr<uint64_t> b = ParseSize(s);
    if (!b.ok()) return b.status();
    o.sizes.push_back(*b);
  }
  if (o.sizes.empty()) o.sizes = DefaultSizes();
  if (o.dtypes.empty() || o.ops.empty())
    return absl::InvalidArgumentError("empty --dtypes or --ops");
  return o;
}

absl::StatusOr<xpu::v1::CalibrationReport> RunCalibration(const CalibrateOptions& o,
                                                          std::ostream& log) {
  std::vector<std::string> notes;
  absl::StatusOr<CudaLibs> libs = LoadCudaLibs(o.lib_dirs, &notes);
  if (!libs.ok()) return libs.status();
  for (const std::string& n : notes) log << "note: " << n << "\n";
  int count = 0;
  if (cudaError_t e = libs->get_device_count(&count); e != cudaSuccess || count < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device (", e != cudaSuccess ? libs->CudaError(e) : "0 devices", ")"));
  }
  const int devices = o.devices > 0 ? std::min(o.devices, count) : count;
  xpu::v1::CalibrationReport r;
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof(prop));
  if (cudaError_t e = libs->get_device_properties(&prop, 0); e != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaGetDeviceProperties: ", libs->CudaError(e)));
  }
  r.set_gpu_model(std::string(prop.name, strnlen(prop.name, sizeof(prop.name))));
  for (int d = 1; d < devices; ++d) {
    cudaDeviceProp other;
    std::memset(&other, 0, sizeof(other));
    if (libs->get_device_properties(&other, d) == cudaSuccess &&
        std::string(other.name, strnlen(other.name, sizeof(other.name))) != r.gpu_model()) {
      log << "warning: device " << d << " is a " << other.name << ", not a " << r.gpu_model()
          << "; the report is stored under " << r.gpu_model() << "\n";
    }
  }
  r.set_host(Hostname());
  r.set_devices(static_cast<uint32_t>(devices));
  r.set_measured_ns(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count()));
  int rt_version = 0;
  libs->runtime_get_version(&rt_version);
  r.set_cuda_runtime_version(absl::StrCat(rt_version / 1000, ".", rt_version % 1000 / 10));
  if (libs->has_nccl()) {
    int v = 0;
    libs->nccl_get_version(&v);
    r.set_nccl_version(absl::StrCat(v / 10000, ".", v / 100 % 100, ".", v % 100));
  }
  r.set_gemm_library(libs->has_lt() ? "cublasLt" : libs->has_blas() ? "cublas" : "");
  log << "xpu-calibrate: " << devices << " x " << r.gpu_model() << " on " << r.host()
      << ", CUDA runtime " << r.cuda_runtime_version() << " (" << libs->cudart_path << ")\n";

  if (o.gemm) {
    for (const std::string& dtype : o.dtypes) {
      double best = 0, worst = 0;
      int measured = 0;
      for (int d = 0; d < devices; ++d) {
        absl::StatusOr<GemmResult> g =
            MeasureGemm(*libs, d, dtype, o.gemm_size, o.gemm_warmup, o.gemm_iters);
        if (!g.ok()) {
          log << "[gemm] " << dtype << " device " << d << ": skipped: " << g.status().message()
              << "\n";
          if (absl::IsUnimplemented(g.status()) || absl::IsNotFound(g.status()))
            break;  // same on every device
          continue;
        }
        char line[128];
        std::snprintf(line, sizeof(line), "%.1f TFLOPS (%.3f ms per GEMM)", g->tflops,
                      g->ms_per_call);
        log << "[gemm] " << dtype << " device " << d << " " << o.gemm_size << "^3: " << line
            << "\n";
        best = measured ? std::max(best, g->tflops) : g->tflops;
        worst = measured ? std::min(worst, g->tflops) : g->tflops;
        ++measured;
      }
      if (measured == 0) continue;
      xpu::v1::GemmCalibration* out = r.add_gemm();
      out->set_dtype(dtype);
      out->set_tflops(best);
      out->set_tflops_min(worst);
      out->set_m(o.gemm_size);
      out->set_n(o.gemm_size);
      out->set_k(o.gemm_size);
      out->set_iterations(static_cast<uint32_t>(o.gemm_iters));
      out->set_devices(static_cast<uint32_t>(measured));
    }
  }
  if (o.collectives) {
    if (devices < 2) {
      log << "[collectives] skipped: one GPU, nothing to communicate with\n";
    } else {
      absl::StatusOr<std::vector<CollectiveResult>> c = MeasureCollectives(
          *libs, devices, o.ops, o.sizes, o.coll_warmup, o.coll_iters,
          [&](const CollectiveResult& x) {
            char us[32];
            std::snprintf(us, sizeof(us), "%.1f", x.time_us);
            log << "[collectives] " << x.op << " " << SizeText(x.bytes) << " over " << x.nranks
                << " GPUs: " << us << " us, algbw " << GbPerS(x.algbw) << " GB/s, busbw "
                << GbPerS(x.busbw) << " GB/s\n";
          });
      if (!c.ok()) {
        log << "[collectives] skipped: " << c.status().message() << "\n";
      } else {
        for (const CollectiveResult& x : *c) {
          xpu::v1::CollectiveCalibration* out = r.add_collectives();
          out->set_op(x.op);
          out->set_bytes(x.bytes);
          out->set_nranks(x.nranks);
          out->set_nodes(1);
          out->set_time_us(x.time_us);
          out->set_algbw_bytes_per_second(x.algbw);
          out->set_busbw_bytes_per_second(x.busbw);
          out->set_iterations(static_cast<uint32_t>(x.iters));
        }
      }
    }
  }
  if (r.gemm_size() == 0 && r.collectives_size() == 0) {
    return absl::FailedPreconditionError("nothing could be measured (see the notes above)");
  }
  return r;
}

int CalibrateMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  absl::StatusOr<CalibrateOptions> o = ParseCalibrateArgs(args);
  if (!o.ok()) {
    err << "xpu-calibrate: " << o.status().message() << " (see xpu-calibrate --help)\n";
    return 64;
  }
  if (o->help) {
    out << CalibrateUsage();
    return 0;
  }
  if (o->version) {
    out << flags::VersionLine("xpu-calibrate") << "\n";
    return 0;
  }
  absl::StatusOr<xpu::v1::CalibrationReport> r = RunCalibration(*o, err);
  if (!r.ok()) {
    err << "xpu-calibrate: " << r.status().message() << "\n";
    return 1;
  }
  if (o->json) {
    out << json::Dump(CalibrationJson(*r), 2) << "\n";
  } else {
    out << CalibrationTable(*r);
  }
  if (!o->out.empty()) {
    std::ofstream f(o->out, std::ios::binary | std::ios::trunc);
    if (!f || !r->SerializeToOstream(&f) || !f.flush()) {
      err << "xpu-calibrate: cannot write " << o->out << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace xpu::calibrate
