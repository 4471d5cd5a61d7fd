// tools/xpu_cli/connection.h — how every `xpu` subcommand reaches the engine:
// address (flag, then $XPU_ENGINE, then the default), TLS credentials and the
// shared token, resolved once from the common flags. Not thread-safe state:
// plain functions over their arguments.
#ifndef XPU_TOOLS_XPU_CLI_CONNECTION_H_
#define XPU_TOOLS_XPU_CLI_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <ostream>
#include <string>

#include "absl/types/span.h"
#include "common/cli/flags.h"
#include "common/rpc/token.h"

namespace xpu::cli {

inline constexpr char kDefaultEngineAddress[] = "127.0.0.1:7441";
// The metadata key of the shared token (common/rpc/token.h: one rule for
// the engine and its clients).
using ::xpu::rpc::kTokenMetadataKey;

// The connection flags every subcommand accepts.
struct ConnectionFlags {
  std::string engine;  // --engine, empty = $XPU_ENGINE or the default
  bool tls = false;    // --tls (implied by any of the three files)
  std::string tls_ca, tls_cert, tls_key, token_file;
};

// Adds --engine, --tls, --tls-ca, --tls-cert, --tls-key and --token-file to
// `cmd` (group "Connection"), bound to `f`.
void AddConnectionOptions(CLI::App* cmd, ConnectionFlags* f);

struct EngineConnection {
  std::string address;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;  // empty: none; send as kTokenMetadataKey metadata
};

// Whole file contents; *ok is false when it cannot be opened.
std::string ReadFile(const std::string& path, bool* ok);

// Resolves `f` into a connection. Without --token-file, an engine on this
// host gives a token for the caller's uid (common/rpc/local_identity.h).
// Returns false with a message on `err` when a TLS or token file cannot be
// read (the caller exits with a usage error).
bool ResolveConnection(const ConnectionFlags& f, const std::string& env_engine,
                       EngineConnection* out, std::ostream& err);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_CONNECTION_H_
