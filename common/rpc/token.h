// common/rpc/token.h — the shared-secret rule of the engine's gRPC
// services, in one place for both sides.
//
// When xpu-engine runs with --token-file, every Query, HangQuery,
// ProfileQuery and History call must carry the token as the
// kTokenMetadataKey metadata entry (the `xpu` CLI sends it from its own
// --token-file), and a daemon presents it in DaemonHello.token. Comparisons
// take the same time whatever the first differing byte, so response times
// do not reveal how much of a guess was right.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_RPC_TOKEN_H_
#define XPU_COMMON_RPC_TOKEN_H_

#include <grpcpp/grpcpp.h>

#include <string_view>

namespace xpu::rpc {

inline constexpr char kTokenMetadataKey[] = "x-xpu-token";

// Constant-time comparison of a presented secret with the expected one;
// false when `expected` is empty (there is nothing to match).
bool TokensEqual(std::string_view presented, std::string_view expected);

// OK when `token` is empty (the engine requires none) or the call carries it
// as kTokenMetadataKey metadata; else UNAUTHENTICATED.
grpc::Status CheckCallToken(const grpc::ServerContext& ctx, std::string_view token);

}  // namespace xpu::rpc

#endif  // XPU_COMMON_RPC_TOKEN_H_
