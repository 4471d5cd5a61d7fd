// engine/profile/profile_service.cc — see profile_service.h.
#include "engine/profile/profile_service.h"

#include "common/rpc/status.h"

namespace xpu::engine::profile {
namespace {

void Fill(const ProfileReport& r, xpu::v1::ProfileResult* out) {
  out->set_found(true);
  out->set_report_json(r.Json());
  out->set_text(r.Text());
}

}  // namespace

grpc::Status ProfileService::Run(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                                 xpu::v1::ProfileResult* out) {
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(*ctx, auth::kAct, req->job(), &caller); !st.ok())
    return st;
  if (req->seconds() * 1000ull > XPU_PROFILE_MAX_DURATION_MS) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "seconds must be at most " + std::to_string(XPU_PROFILE_MAX_DURATION_MS / 1000));
  }
  out->set_job(req->job());
  absl::StatusOr<ProfileReport> r = monitor_.RunNow(req->job(), req->seconds(), req->deadline_ms(),
                                                   auth::ToCommandCaller(caller));
  if (!r.ok()) return rpc::ToGrpcStatus(r.status());
  Fill(*r, out);
  return grpc::Status::OK;
}

grpc::Status ProfileService::Latest(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                                    xpu::v1::ProfileResult* out) {
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(*ctx, auth::kRead, req->job(), &caller); !st.ok())
    return st;
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
