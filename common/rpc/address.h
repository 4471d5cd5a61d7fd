// common/rpc/address.h — what a gRPC address names, and whether it stays on
// this host.
//
// The loopback rule (docs/security.md): an address is local only when its
// host resolves, and every address it resolves to is loopback (127.0.0.0/8,
// ::1, ::ffff:127.x). A name is never judged by its spelling:
// "127.evil.example" resolving to a public address is not local. unix: and
// unix-abstract: targets are local.
//
// Thread-safety: pure functions (getaddrinfo is thread-safe).
#ifndef XPU_COMMON_RPC_ADDRESS_H_
#define XPU_COMMON_RPC_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xpu::rpc {

struct HostPort {
  std::string host;  // without brackets
  std::string port;  // may be empty
  bool unix_socket = false;
};

// Splits "host:port", "[v6]:port", "dns:///host:port", "ipv4:a.b.c.d:port",
// "ipv6:[::1]:port" or "unix:/path" into its parts.
absl::StatusOr<HostPort> SplitAddress(const std::string& address);

// OK when every address `address`'s host resolves to is loopback; else
// FAILED_PRECONDITION naming the first one that is not (or NOT_FOUND when it
// does not resolve).
absl::Status CheckLoopback(const std::string& address);
inline bool IsLoopback(const std::string& address) { return CheckLoopback(address).ok(); }

}  // namespace xpu::rpc

#endif  // XPU_COMMON_RPC_ADDRESS_H_
