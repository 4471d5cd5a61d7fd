// engine/hang/hang_service.cc — see hang_service.h.
#include "engine/hang/hang_service.h"


namespace xpu::engine::hang {

grpc::Status HangService::Get(grpc::ServerContext* ctx, const xpu::v1::HangRequest* req,
                              xpu::v1::HangReply* reply) {
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(
          *ctx, req->collect_now() ? auth::kAct : auth::kRead, req->job(), &caller);
      !st.ok()) {
    return st;
  }
  reply->set_job(req->job());
  std::optional<HangReport> report;
  if (req->collect_now()) {
    absl::StatusOr<HangReport> r =
        monitor_.CollectNow(req->job(), req->deadline_ms(), auth::ToCommandCaller(caller));
    if (!r.ok())
      return grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(r.status().message()));
    report = std::move(*r);
  } else {
    report = monitor_.Latest(req->job());
  }
  if (!report) {
    reply->set_found(false);
    return grpc::Status::OK;
  }
  reply->set_found(true);
  reply->set_report_json(report->Json());
  reply->set_text(report->Text());
  reply->set_folded(report->tree.Folded());
  reply->set_svg(report->tree.Svg("xpu stacks: job " + report->job));
  return grpc::Status::OK;
}

}  // namespace xpu::engine::hang
