// engine/profile/profile_service.h — the ProfileQuery gRPC service (proto
// xpu.v1): Run starts a profiling window on every rank of a live job and
// returns the localization (`xpu profile`); Latest returns the last report.
// Run needs the act permission on the job (the daemons check the caller's
// uid again), Latest needs read (engine/auth/authorizer.h).
//
// Thread-safety: handlers run concurrently; ProfileMonitor is thread-safe.
#ifndef XPU_ENGINE_PROFILE_PROFILE_SERVICE_H_
#define XPU_ENGINE_PROFILE_PROFILE_SERVICE_H_

#include <string>

#include "engine/auth/authorizer.h"
#include "engine/profile/profile_monitor.h"
#include "xpu/v1/profile.grpc.pb.h"

namespace xpu::engine::profile {

class ProfileService final : public xpu::v1::ProfileQuery::Service {
 public:
  ProfileService(ProfileMonitor& monitor, const auth::Authorizer& authorizer)
      : monitor_(monitor), authorizer_(authorizer) {}
  grpc::Status Run(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                   xpu::v1::ProfileResult* out) override;
  grpc::Status Latest(grpc::ServerContext* ctx, const xpu::v1::ProfileRequest* req,
                      xpu::v1::ProfileResult* out) override;

 private:
  ProfileMonitor& monitor_;
  const auth::Authorizer& authorizer_;
};

}  // namespace xpu::engine::profile

#endif  // XPU_ENGINE_PROFILE_PROFILE_SERVICE_H_
