// engine/hang/hang_service.h — the HangQuery gRPC service (proto xpu.v1):
// Get returns the latest hang report of a job, or with collect_now a merged
// stack view collected on the spot (`xpu stacks`). The report needs read on
// the job; collecting (debuggers, signals on its processes) needs act, and
// the daemons check the caller's uid once more (engine/auth/authorizer.h).
//
// Thread-safety: handlers run concurrently; HangMonitor is thread-safe.
#ifndef XPU_ENGINE_HANG_HANG_SERVICE_H_
#define XPU_ENGINE_HANG_HANG_SERVICE_H_

#include <string>

#include "engine/auth/authorizer.h"
#include "engine/hang/hang_monitor.h"
#include "xpu/v1/hang.grpc.pb.h"

namespace xpu::engine::hang {

class HangService final : public xpu::v1::HangQuery::Service {
 public:
  HangService(HangMonitor& monitor, const auth::Authorizer& authorizer)
      : monitor_(monitor), authorizer_(authorizer) {}
  grpc::Status Get(grpc::ServerContext* ctx, const xpu::v1::HangRequest* req,
                   xpu::v1::HangReply* reply) override;

 private:
  HangMonitor& monitor_;
  const auth::Authorizer& authorizer_;
};

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_HANG_SERVICE_H_
