// history_service — the History gRPC service (proto xpu.v1): calibration
// uploads from `xpu calibrate` and read access to the stored calibrations
// and run baselines. Uploads need the admin permission (a calibration is
// what the GEMM and link detectors trust); reading calibrations needs any
// read permission; baselines list only runs of jobs the caller may read
// (engine/auth/authorizer.h).
//
// An upload is validated as a whole (it comes from the network): a GPU
// model, known dtypes and ops, finite positive figures, sane sizes; one bad
// entry rejects the report with INVALID_ARGUMENT naming it. Accepted rows
// are committed before the reply (the store is flushed), so a job started
// after `xpu calibrate` returns sees them.
// Thread-safety: handlers run concurrently; the store is thread-safe.
#ifndef XPU_ENGINE_HISTORY_HISTORY_SERVICE_H_
#define XPU_ENGINE_HISTORY_HISTORY_SERVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/auth/authorizer.h"
#include "engine/history/baselines.h"
#include "engine/history/store.h"
#include "xpu/v1/history.grpc.pb.h"

namespace xpu::engine::history {

// Validates `r` and converts it to store rows (exposed for tests).
absl::StatusOr<CalibrationRows> CalibrationRowsOf(const xpu::v1::CalibrationReport& r);

class HistoryService final : public xpu::v1::History::Service {
 public:
  HistoryService(Store* store, const auth::Authorizer& authorizer)
      : store_(store), authorizer_(authorizer) {}

  grpc::Status UploadCalibration(grpc::ServerContext* ctx, const xpu::v1::CalibrationReport* req,
                                 xpu::v1::UploadCalibrationReply* reply) override;
  grpc::Status Calibrations(grpc::ServerContext* ctx, const xpu::v1::CalibrationsRequest* req,
                            xpu::v1::CalibrationsReply* reply) override;
  grpc::Status Baselines(grpc::ServerContext* ctx, const xpu::v1::BaselinesRequest* req,
                         xpu::v1::BaselinesReply* reply) override;

 private:
  Store* store_;
  const auth::Authorizer& authorizer_;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_HISTORY_SERVICE_H_
