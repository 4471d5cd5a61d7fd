// `xpu calibrate` end to end on the GPU-less runtime: the real `xpu` binary
// runs the real xpu-calibrate against the fake CUDA libraries (4 fake GPUs
// of one process, GEMM time from the fake runtime's FLOP model, collectives
// through its shared-memory rendezvous), uploads the report to an engine,
// and the engine's unoptimized_gemm judges a job on that GPU model against
// the stored peak. Values are whatever the fake runtime produced: the test
// checks that they are stored as measured and used, not what they are.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "engine/engine.h"
#include "engine/testing/fake_daemon.h"
#include "tests/scenarios/synthetic_job.h"
#include "xpu/formulas.h"
#include "xpu/v1/history.grpc.pb.h"

namespace xpu::scenarios {
namespace {

std::string RunCommand(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Runs a synthetic job for two windows; returns the unoptimized_gemm
// diagnoses of its last window.
std::vector<engine::Diagnosis> GemmFindings(engine::Engine& eng,
                                            engine::testing::FakeDaemon& daemon,
                                            const SyntheticJobSpec& spec) {
  SyntheticJob job(spec, NowNs());
  std::vector<engine::Diagnosis> last;
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(daemon.Send(job.NextWindow(5)));
    const uint64_t want = job.records_emitted();
    EXPECT_TRUE(engine::testing::WaitFor(
        [&] {
          auto j = eng.registry().FindJob(spec.job);
          if (!j) return false;
          std::lock_guard<std::mutex> l(j->mu());
          return j->records() >= want;
        },
        std::chrono::seconds(60)));
    last.clear();
    for (engine::Diagnosis& d : eng.TickWindow()) {
      if (d.job == spec.job && d.kind == "unoptimized_gemm") last.push_back(std::move(d));
    }
  }
  return last;
}

std::string Fmt1(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", v);
  return b;
}

TEST(CalibrateE2eTest, StoresWhatItMeasuredAndUnoptimizedGemmUsesIt) {
  auto started = engine::Engine::Start(engine::testing::TestOptions());
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<engine::Engine> eng = std::move(*started);

  // Four fake GPUs; a fake peak far above the synthetic job's GEMM rate so
  // that the run below can sit on either side of 0.6 x the measured peak.
  const std::string cmd =
      std::string("XPU_FAKE_DEVICES=4 XPU_FAKE_TFLOPS=1000 XPU_CALIBRATE=") + XPU_CALIBRATE_PATH +
      " " + XPU_CLI_PATH + " calibrate --engine 127.0.0.1:" + std::to_string(eng->port()) +
      " --lib-dir " + XPU_FAKE_LIB_DIR +
      " --dtypes bf16,fp16 --gemm-size 2048 --gemm-iters 5 --sizes 256K,1M --coll-iters 3 --json";
  int code = -1;
  const std::string json = RunCommand(cmd + " 2>/dev/null", &code);
  ASSERT_EQ(code, 0) << cmd << "\n" << json;
  google::protobuf::Struct printed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &printed).ok()) << json;
  const std::string model = printed.fields().at("gpu_model").string_value();
  ASSERT_FALSE(model.empty());
  EXPECT_EQ(printed.fields().at("gemm_rows").number_value(), 2);
  EXPECT_EQ(printed.fields().at("collective_rows").number_value(), 6) << "3 ops x 2 sizes";

  // What the engine stored equals what the tool printed.
  auto history = xpu::v1::History::NewStub(xpu::engine::testing::TestChannel(eng->port()));
  grpc::ClientContext ctx;
  xpu::v1::CalibrationsRequest req;
  req.set_gpu_model(model);
  xpu::v1::CalibrationsReply stored;
  ASSERT_TRUE(history->Calibrations(&ctx, req, &stored).ok());
  ASSERT_EQ(stored.reports_size(), 1);
  const xpu::v1::CalibrationReport& r = stored.reports(0);
  const auto& printed_report = printed.fields().at("report").struct_value();
  // Field names are snake_case, as everywhere in the project's JSON.
  EXPECT_EQ(printed_report.fields().count("cuda_runtime_version"), 1u) << json;
  EXPECT_EQ(printed_report.fields().count("cudaRuntimeVersion"), 0u) << json;
  ASSERT_GT(printed_report.fields().at("gemm").list_value().values_size(), 0);
  EXPECT_EQ(printed_report.fields().at("gemm").list_value().values(0).struct_value().fields().count(
                "tflops_min"),
            1u)
      << json;
  std::map<std::string, double> printed_tflops;
  for (const auto& g : printed_report.fields().at("gemm").list_value().values()) {
    printed_tflops[g.struct_value().fields().at("dtype").string_value()] =
        g.struct_value().fields().at("tflops").number_value();
  }
  double bf16_peak = 0;
  ASSERT_EQ(r.gemm_size(), 2);
  for (const auto& g : r.gemm()) {
    EXPECT_GT(g.tflops(), 0) << g.dtype();
    EXPECT_LE(g.tflops_min(), g.tflops());
    EXPECT_EQ(g.devices(), 4u);
    EXPECT_DOUBLE_EQ(g.tflops(), printed_tflops[g.dtype()]) << g.dtype();
    if (g.dtype() == "bf16") bf16_peak = g.tflops();
  }
  ASSERT_GT(bf16_peak, 0);
  ASSERT_EQ(r.collectives_size(), 6);
  for (const auto& c : r.collectives()) {
    EXPECT_EQ(c.nranks(), 4);
    EXPECT_EQ(c.nodes(), 1);
    EXPECT_GT(c.busbw_bytes_per_second(), 0);
    // nccl-tests definitions with the project's factors.
    const uint32_t kind = c.op() == "allreduce"   ? XPU_OP_ALLREDUCE
                          : c.op() == "allgather" ? XPU_OP_ALLGATHER
                                                  : XPU_OP_REDUCESCATTER;
    EXPECT_NEAR(c.busbw_bytes_per_second(), c.algbw_bytes_per_second() * xpu_busbw_factor(kind, 4),
                1e-6 * c.busbw_bytes_per_second());
    EXPECT_NEAR(c.algbw_bytes_per_second(), static_cast<double>(c.bytes()) / (c.time_us() * 1e-6),
                1e-6 * c.algbw_bytes_per_second());
  }

  // A job on this GPU model whose GEMMs all reach half the calibrated bf16
  // peak: steady, so the job's own best shape sees nothing wrong, but the
  // calibration does. (The synthetic job's well-shaped GEMMs run at 80 % of
  // its modelled peak.)
  engine::testing::FakeDaemon daemon(eng->port(), "calibrate-daemon");
  ASSERT_TRUE(daemon.Hello());
  SyntheticJobSpec slow;
  slow.job = "half-of-peak";
  slow.gpu_model = model;
  slow.peak_tflops = 0.5 * bf16_peak / 0.8;
  std::vector<engine::Diagnosis> found = GemmFindings(*eng, daemon, slow);
  ASSERT_FALSE(found.empty()) << "no unoptimized_gemm against the calibrated peak";
  for (const engine::Diagnosis& d : found) {
    EXPECT_NE(d.evidence.find("calibrated bf16 peak of " + model), std::string::npos) << d.evidence;
    EXPECT_NE(d.evidence.find("reference " + Fmt1(bf16_peak) + " TFLOPS"), std::string::npos)
        << d.evidence;
    EXPECT_EQ(d.ranks.size(), 8u);
  }
  // Near the peak: nothing. And the same slow job on a model without a
  // calibration: the job's best shape is the reference, nothing either.
  SyntheticJobSpec fast = slow;
  fast.job = "near-peak";
  fast.peak_tflops = 0.9 * bf16_peak / 0.8;
  EXPECT_TRUE(GemmFindings(*eng, daemon, fast).empty());
  SyntheticJobSpec uncalibrated = slow;
  uncalibrated.job = "uncalibrated";
  uncalibrated.gpu_model = "Uncalibrated GPU";
  EXPECT_TRUE(GemmFindings(*eng, daemon, uncalibrated).empty());
  daemon.Finish();
}

}  // namespace
}  // namespace xpu::scenarios
