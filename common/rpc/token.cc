// common/rpc/token.cc — see token.h.
#include "common/rpc/token.h"

#include <string>

namespace xpu::rpc {

bool TokensEqual(std::string_view presented, std::string_view expected) {
  // Walks all of `presented` whatever its content; lengths are not secret.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  const size_t n = expected.empty() ? 1 : expected.size();
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i]) ^
            static_cast<unsigned char>(expected.empty() ? 0 : expected[i % n]);
  }
  return diff == 0 && !expected.empty();
}

grpc::Status CheckCallToken(const grpc::ServerContext& ctx, std::string_view token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it == md.end() ||
      !TokensEqual(std::string_view(it->second.data(), it->second.size()), token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this engine requires a token (xpu --token-file): missing or wrong " +
                            std::string(kTokenMetadataKey) + " metadata");
  }
  return grpc::Status::OK;
}

}  // namespace xpu::rpc
