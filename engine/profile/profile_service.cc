// engine/profile/profile_service.cc — see profile_service.h.
#include "engine/profile/profile_service.h"

namespace xpu::engine::profile {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      break;
  }
  return grpc::Status(code, std::string(s.message()));
}

void Fill(const ProfileReport& r, xpu::v1::ProfileResult* out) {
  out->set_found(true);
  out->set_report_json(r.Json());
  out->set_text(r.Text());
}

}  // namespace

grpc::Status ProfileService::CheckToken(grpc::ServerContext* ctx) const {
  if (token_.empty()) return grpc::Status::OK;
  auto it = ctx->client_metadata().find("x-xpu-token");
  if (it == ctx->client_metadata().end() ||
      std::string(it->second.data(), it->second.size()) != token_) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong x-xpu-token");
  }
  return grpc::Status::OK;
}

grpc::Status ProfileService::Run(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                                 xpu::v1::ProfileResult* out) {
  if (grpc::Status st = CheckToken(ctx); !st.ok()) return st;
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  if (req->seconds() * 1000ull > XPU_PROFILE_MAX_DURATION_MS) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "seconds must be at most " + std::to_string(XPU_PROFILE_MAX_DURATION_MS / 1000));
  }
  out->set_job(req->job());
  absl::StatusOr<ProfileReport> r = monitor_.RunNow(req->job(), req->seconds(), req->deadline_ms());
  if (!r.ok()) return ToGrpc(r.status());
  Fill(*r, out);
  return grpc::Status::OK;
}

grpc::Status ProfileService::Latest(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                                    xpu::v1::ProfileResult* out) {
  if (grpc::Status st = CheckToken(ctx); !st.ok()) return st;
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  out->set_job(req->job());
  std::optional<ProfileReport> r = monitor_.Latest(req->job());
  if (!r) {
    out->set_found(false);
    return grpc::Status::OK;
  }
  Fill(*r, out);
  return grpc::Status::OK;
}

}  // namespace xpu::engine::profile
