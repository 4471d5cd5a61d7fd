// common/rpc/status.cc — see status.h.
#include "common/rpc/status.h"

#include <string>

namespace xpu::rpc {

static_assert(static_cast<int>(grpc::StatusCode::NOT_FOUND) ==
                  static_cast<int>(absl::StatusCode::kNotFound),
              "gRPC and absl share the canonical codes");
static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) ==
                  static_cast<int>(absl::StatusCode::kUnauthenticated),
              "gRPC and absl share the canonical codes");

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  // absl may carry codes gRPC does not define; they are UNKNOWN on the wire.
  const grpc::StatusCode grpc_code = code > 0 && code <= grpc::StatusCode::UNAUTHENTICATED
                                         ? static_cast<grpc::StatusCode>(code)
                                         : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const absl::StatusCode absl_code =
      code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
          ? static_cast<absl::StatusCode>(code)
          : absl::StatusCode::kUnknown;
  return absl::Status(absl_code, status.error_message());
}

}  // namespace xpu::rpc
