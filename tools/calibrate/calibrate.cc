#include "tools/calibrate/calibrate.h"

#include <google/protobuf/util/json_util.h>
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
#include "tools/calibrate/cuda_libs.h"
#include "tools/calibrate/gemm_bench.h"
#include "tools/calibrate/nccl_bench.h"
#include "tools/calibrate/report.h"

namespace xpu::calibrate {

const char kCalibrateUsage[] =
    R"(xpu-calibrate: measure what this node's GPUs reach, for XPUTimer's detectors.

Usage: xpu-calibrate [flags]        (usually run as `xpu calibrate`, which uploads the result)

Measures, on every visible GPU (CUDA_VISIBLE_DEVICES applies):
  * GEMM peak TFLOPS per dtype: a square m = n = k GEMM through cuBLASLt
    (else cuBLAS), timed with CUDA events; best and slowest device;
  * collective bus bandwidth per size across all GPUs of the node, in one
    process (ncclCommInitAll), nccl-tests definitions: algbw = bytes / time,
    busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n (all-gather, reduce-scatter).
The CUDA libraries are loaded at run time (no link-time dependency):
libcudart.so.13, libcublasLt.so.13 / libcublas.so.13, libnccl.so.2 from each
--lib-dir DIR (DIR/<soname> and DIR/*/lib/<soname>, so a PyTorch virtualenv's
.../site-packages/nvidia works), then LD_LIBRARY_PATH and the system paths.

Flags:
  --lib-dir DIR           where the CUDA libraries are (repeatable)
  --dtypes LIST           GEMM dtypes, comma-separated (default bf16,fp16,tf32,fp32,fp8;
                          fp8 is skipped below compute capability 8.9)
  --gemm-size N           m = n = k of the GEMM (default 8192)
  --gemm-iters N          timed GEMMs per device and dtype (default 50; warm-up 10)
  --ops LIST              collectives (default allreduce,allgather,reducescatter)
  --sizes LIST            collective sizes, e.g. 1M,16M,256M,1G (default 1 MiB..1 GiB, powers of 4)
  --coll-iters N          timed iterations per size (default 20; warm-up 5)
  --devices N             use the first N GPUs (default all)
  --no-gemm, --no-collectives
  --out FILE              write the report (xpu.v1.CalibrationReport, binary protobuf)
  --json                  print the report as JSON instead of the table
  --help                  this text
Progress goes to stderr, the table (or JSON) to stdout.
Exit codes: 0 ok, 1 nothing could be measured or --out failed, 64 usage.
)";

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

absl::StatusOr<CalibrateOptions> ParseCalibrateArgs(const std::vector<std::string>& args) {
  CalibrateOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool inline_value = false;
    if (size_t eq = a.find('='); absl::StartsWith(a, "--") && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      inline_value = true;
    }
    auto take = [&]() -> absl::StatusOr<std::string> {
      if (inline_value) return value;
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
      return args[++i];
    };
    auto take_int = [&](int lo) -> absl::StatusOr<int> {
      absl::StatusOr<std::string> v = take();
      if (!v.ok()) return v.status();
      int n = 0;
      if (!absl::SimpleAtoi(*v, &n) || n < lo) {
        return absl::InvalidArgumentError(
            absl::StrCat(a, ": '", *v, "' is not an integer >= ", lo));
      }
      return n;
    };
    absl::StatusOr<std::string> v;
    absl::StatusOr<int> n;
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--no-gemm") {
      o.gemm = false;
    } else if (a == "--no-collectives") {
      o.collectives = false;
    } else if (a == "--lib-dir") {
      if (!(v = take()).ok()) return v.status();
      o.lib_dirs.push_back(*v);
    } else if (a == "--out") {
      if (!(v = take()).ok()) return v.status();
      o.out = *v;
    } else if (a == "--dtypes") {
      if (!(v = take()).ok()) return v.status();
      o.dtypes = List(*v);
      for (const std::string& d : o.dtypes) {
        if (!KnownGemmDtype(d))
          return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", d, "'"));
      }
    } else if (a == "--ops") {
      if (!(v = take()).ok()) return v.status();
      o.ops = List(*v);
      for (const std::string& op : o.ops) {
        if (!KnownCollective(op))
          return absl::InvalidArgumentError(absl::StrCat("unknown collective '", op, "'"));
      }
    } else if (a == "--sizes") {
      if (!(v = take()).ok()) return v.status();
      o.sizes.clear();
      for (const std::string& s : List(*v)) {
        absl::StatusOr<uint64_t> b = ParseSize(s);
        if (!b.ok()) return b.status();
        o.sizes.push_back(*b);
      }
    } else if (a == "--gemm-size") {
      if (!(n = take_int(16)).ok()) return n.status();
      o.gemm_size = static_cast<uint32_t>(*n);
    } else if (a == "--gemm-iters") {
      if (!(n = take_int(1)).ok()) return n.status();
      o.gemm_iters = *n;
    } else if (a == "--coll-iters") {
      if (!(n = take_int(1)).ok()) return n.status();
      o.coll_iters = *n;
    } else if (a == "--devices") {
      if (!(n = take_int(1)).ok()) return n.status();
      o.devices = *n;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", args[i], "'"));
    }
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
    err << "xpu-calibrate: " << o.status().message() << "\n(see xpu-calibrate --help)\n";
    return 64;
  }
  if (o->help) {
    out << kCalibrateUsage;
    return 0;
  }
  absl::StatusOr<xpu::v1::CalibrationReport> r = RunCalibration(*o, err);
  if (!r.ok()) {
    err << "xpu-calibrate: " << r.status().message() << "\n";
    return 1;
  }
  if (o->json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions jo;
    jo.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(*r, &json, jo);
    out << json;
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
