// common/rpc/status.h — absl::Status inside our processes, grpc::Status on
// the wire: the conversion at the edge, in both directions.
//
// The two code spaces are the same canonical codes (google.rpc.Code), so a
// code crosses unchanged: a NotFoundError inside the engine is NOT_FOUND to
// the caller, and the other way round. Messages are kept.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_RPC_STATUS_H_
#define XPU_COMMON_RPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace xpu::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status ToAbslStatus(const grpc::Status& status);

}  // namespace xpu::rpc

#endif  // XPU_COMMON_RPC_STATUS_H_
