#include "engine/history/history_service.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/rpc/status.h"

namespace xpu::engine::history {
namespace {

constexpr size_t kMaxName = 256;
constexpr int kMaxEntries = 4096;
constexpr int32_t kMaxRanks = 1 << 20;

std::shared_ptr<spdlog::logger> Log() {
  static auto log = logging::GetLogger("history");
  return log;
}

bool Printable(const std::string& s) {
  if (s.empty() || s.size() > kMaxName) return false;
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool Positive(double v) { return std::isfinite(v) && v > 0; }

const std::set<std::string>& KnownDtypes() {
  static const auto* s = new std::set<std::string>{"bf16", "fp16", "tf32", "fp32", "fp8"};
  return *s;
}
const std::set<std::string>& KnownOps() {
  static const auto* s = new std::set<std::string>{"allreduce", "allgather", "reducescatter",
                                                   "broadcast", "reduce",    "alltoall"};
  return *s;
}

}  // namespace

absl::StatusOr<CalibrationRows> CalibrationRowsOf(const xpu::v1::CalibrationReport& r) {
  if (!Printable(r.gpu_model())) {
    return absl::InvalidArgumentError(
        "calibration: gpu_model must be 1-256 printable ASCII characters");
  }
  if (!Printable(r.host()))
    return absl::InvalidArgumentError("calibration: host must be 1-256 printable characters");
  if (r.gemm_size() + r.collectives_size() == 0)
    return absl::InvalidArgumentError("calibration: no measurement");
  if (r.gemm_size() + r.collectives_size() > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration: more than ", kMaxEntries, " entries"));
  }
  CalibrationRows out;
  std::set<std::string> dtypes;
  for (int i = 0; i < r.gemm_size(); ++i) {
    const xpu::v1::GemmCalibration& g = r.gemm(i);
    if (!KnownDtypes().count(g.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("calibration: gemm[", i, "]: unknown dtype '",
                                                     g.dtype(), "' (bf16, fp16, tf32, fp32, fp8)"));
    }
    if (!Positive(g.tflops()) || g.tflops() > 1e6 ||
        !(std::isfinite(g.tflops_min()) && g.tflops_min() >= 0) || g.tflops_min() > g.tflops()) {
      return absl::InvalidArgumentError(
          absl::StrCat("calibration: gemm[", i, "] (", g.dtype(),
                       "): TFLOPS must be finite, 0 < min <= best < 1e6"));
    }
    if (!dtypes.insert(g.dtype()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("calibration: dtype ", g.dtype(), " measured twice"));
    }
    GemmCalibrationRow row;
    row.gpu_model = r.gpu_model();
    row.host = r.host();
    row.dtype = g.dtype();
    row.tflops = g.tflops();
    row.tflops_min = g.tflops_min() > 0 ? g.tflops_min() : g.tflops();
    row.m = g.m();
    row.n = g.n();
    row.k = g.k();
    row.devices = g.devices();
    row.measured_ns = r.measured_ns();
    out.gemm.push_back(std::move(row));
  }
  std::set<std::tuple<std::string, uint64_t, int32_t, int32_t>> seen;
  for (int i = 0; i < r.collectives_size(); ++i) {
    const xpu::v1::CollectiveCalibration& c = r.collectives(i);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("calibration: collectives[", i, "] (", c.op(),
                                                     " ", c.bytes(), " bytes): ", why));
    };
    if (!KnownOps().count(c.op())) return bad("unknown op");
    if (c.bytes() == 0) return bad("bytes must be > 0");
    if (c.nranks() < 2 || c.nranks() > kMaxRanks) return bad("nranks must be >= 2");
    if (c.nodes() < 1 || c.nodes() > c.nranks()) return bad("nodes must be in [1, nranks]");
    if (!Positive(c.busbw_bytes_per_second()) || !Positive(c.algbw_bytes_per_second()) ||
        !Positive(c.time_us())) {
      return bad("time, algbw and busbw must be finite and > 0");
    }
    if (!seen.insert({c.op(), c.bytes(), c.nranks(), c.nodes()}).second)
      return bad("measured twice");
    CollectiveCalibrationRow row;
    row.gpu_model = r.gpu_model();
    row.host = r.host();
    row.shape = CollectiveShape{c.op(), c.bytes(), c.nranks(), c.nodes()};
    row.time_us = c.time_us();
    row.algbw = c.algbw_bytes_per_second();
    row.busbw = c.busbw_bytes_per_second();
    row.measured_ns = r.measured_ns();
    out.collectives.push_back(std::move(row));
  }
  return out;
}

grpc::Status HistoryService::UploadCalibration(grpc::ServerContext* ctx,
                                               const xpu::v1::CalibrationReport* req,
                                               xpu::v1::UploadCalibrationReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.Require(*ctx, auth::kAdmin, &caller); !st.ok()) return st;
  if (store_ == nullptr)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the engine has no store");
  absl::StatusOr<CalibrationRows> rows = CalibrationRowsOf(*req);
  if (!rows.ok()) return rpc::ToGrpcStatus(rows.status());
  store_->EnqueueCalibration(*rows);
  if (absl::Status st = store_->Flush(); !st.ok()) return rpc::ToGrpcStatus(st);
  reply->set_gemm_rows(static_cast<uint32_t>(rows->gemm.size()));
  reply->set_collective_rows(static_cast<uint32_t>(rows->collectives.size()));
  Log()->info("calibration of '{}' from {} by {}: {} GEMM dtypes, {} collective sizes",
              req->gpu_model(), req->host(), caller.name, rows->gemm.size(),
              rows->collectives.size());
  return grpc::Status::OK;
}

grpc::Status HistoryService::Calibrations(grpc::ServerContext* ctx,
                                          const xpu::v1::CalibrationsRequest* req,
                                          xpu::v1::CalibrationsReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.Require(*ctx, auth::kRead, &caller); !st.ok()) return st;
  if (store_ == nullptr)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the engine has no store");
  absl::StatusOr<CalibrationRows> rows = store_->LoadCalibration(req->gpu_model());
  if (!rows.ok()) return rpc::ToGrpcStatus(rows.status());
  std::map<std::pair<std::string, std::string>, xpu::v1::CalibrationReport*> by_host;
  auto report = [&](const std::string& model, const std::string& host, uint64_t measured_ns) {
    xpu::v1::CalibrationReport*& r = by_host[{model, host}];
    if (r == nullptr) {
      r = reply->add_reports();
      r->set_gpu_model(model);
      r->set_host(host);
    }
    r->set_measured_ns(std::max(r->measured_ns(), measured_ns));
    return r;
  };
  for (const GemmCalibrationRow& g : rows->gemm) {
    xpu::v1::GemmCalibration* out = report(g.gpu_model, g.host, g.measured_ns)->add_gemm();
    out->set_dtype(g.dtype);
    out->set_tflops(g.tflops);
    out->set_tflops_min(g.tflops_min);
    out->set_m(g.m);
    out->set_n(g.n);
    out->set_k(g.k);
    out->set_devices(g.devices);
  }
  for (const CollectiveCalibrationRow& c : rows->collectives) {
    xpu::v1::CollectiveCalibration* out =
        report(c.gpu_model, c.host, c.measured_ns)->add_collectives();
    out->set_op(c.shape.op);
    out->set_bytes(c.shape.bytes);
    out->set_nranks(c.shape.nranks);
    out->set_nodes(c.shape.nodes);
    out->set_time_us(c.time_us);
    out->set_algbw_bytes_per_second(c.algbw);
    out->set_busbw_bytes_per_second(c.busbw);
  }
  return grpc::Status::OK;
}

grpc::Status HistoryService::Baselines(grpc::ServerContext* ctx,
                                       const xpu::v1::BaselinesRequest* req,
                                       xpu::v1::BaselinesReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.Require(*ctx, auth::kRead, &caller); !st.ok()) return st;
  if (store_ == nullptr)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the engine has no store");
  if (req->job_name().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_name is required");
  absl::StatusOr<std::vector<RunBaseline>> runs =
      store_->LoadRunBaselines(req->job_name(), req->gpu_model(), req->gpu_model().empty(), "", 0);
  if (!runs.ok()) return rpc::ToGrpcStatus(runs.status());
  reply->set_job_name(req->job_name());
  for (const RunBaseline& r : *runs) {
    if (!authorizer_.MayOnJob(caller, auth::kRead, r.job)) continue;  // another user's run
    xpu::v1::BaselineRun* out = reply->add_runs();
    out->set_job(r.job);
    out->set_gpu_model(r.gpu_model);
    out->set_updated_ns(r.updated_ns);
    out->set_windows(r.windows);
    out->set_steps(r.steps);
    out->set_step_median_s(r.step_median_s);
    out->set_step_best_s(r.step_best_s);
    out->set_void_inter(r.void_inter);
    out->set_void_minority(r.void_minority);
    out->set_gemm_signatures(static_cast<uint32_t>(r.gemm.size()));
    out->set_collective_shapes(static_cast<uint32_t>(r.busbw.size()));
  }
  return grpc::Status::OK;
}

}  // namespace xpu::engine::history
