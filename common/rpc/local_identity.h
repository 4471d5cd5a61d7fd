// common/rpc/local_identity.h — how a local program proves its uid to an
// engine on the same host without any configuration (docs/security.md).
//
// The engine listens on a Unix socket in the abstract namespace named after
// its gRPC port ("xpu-engine-<port>"; no file, nothing to find). Whoever
// connects is identified by the kernel (SO_PEERCRED) and gets one line back:
//
//   XPU-IDENTITY 1 <token> <expires, unix seconds>\n
//
// The token stands for that uid (and, for root or a member of the engine's
// admin group, for all jobs) until it expires or the engine restarts. The
// CLI and the daemon fetch one per connection and present it like any
// other credential (x-xpu-token metadata, DaemonHello.token). A process that
// squats the name can hand out only tokens the engine does not know: it
// learns nothing and grants nothing.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_RPC_LOCAL_IDENTITY_H_
#define XPU_COMMON_RPC_LOCAL_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace xpu::rpc {

inline constexpr char kLocalIdentityMagic[] = "XPU-IDENTITY";
inline constexpr char kLocalTokenPrefix[] = "local1.";

// The abstract socket name of the engine listening on `port`.
std::string LocalIdentityName(int port);

// For an engine `address` that is loopback (address.h): its identity
// token. NOT_FOUND when nothing answers (an engine too old, or
// --identity-socket off), FAILED_PRECONDITION for a non-local address.
absl::StatusOr<std::string> FetchLocalIdentity(const std::string& address, int timeout_ms = 2000);

// Connects to the abstract socket `name` and reads the token.
absl::StatusOr<std::string> FetchLocalIdentityFrom(const std::string& name, int timeout_ms);

}  // namespace xpu::rpc

#endif  // XPU_COMMON_RPC_LOCAL_IDENTITY_H_
