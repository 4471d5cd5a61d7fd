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
#include <string_view>
#include <vector>

#include "absl/types/span.h"
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

template <class Flags>
ConnectionFlags ConnectionFlagsOf(const Flags& f) {
  return ConnectionFlags{f.engine, f.tls, f.tls_ca, f.tls_cert, f.tls_key, f.token_file};
}

// The connection flags that take a value: --engine, --token-file, --tls-ca,
// --tls-cert, --tls-key (--tls takes none).
bool IsConnectionValueFlag(std::string_view flag);

// Stores the value of a connection flag (IsConnectionValueFlag) in the
// subcommand's flags; the three TLS files imply --tls.
template <class Flags>
void SetConnectionFlag(std::string_view flag, const std::string& value, Flags* f) {
  if (flag == "--engine") {
    f->engine = value;
  } else if (flag == "--token-file") {
    f->token_file = value;
  } else if (flag == "--tls-ca") {
    f->tls_ca = value, f->tls = true;
  } else if (flag == "--tls-cert") {
    f->tls_cert = value, f->tls = true;
  } else if (flag == "--tls-key") {
    f->tls_key = value, f->tls = true;
  }
}

// A duration flag's value: seconds in (0, max]; else false with
// "<flag> needs seconds in (0, <max>]" in *error.
bool ParseSeconds(const std::string& flag, const std::string& v, double max, double* out,
                  std::string* error);

// The first argument that is neither a flag nor the value of one (the
// connection flags' and `value_flags`'), or empty: which subcommand the
// arguments are for.
std::string CommandWord(const std::vector<std::string>& args,
                        absl::Span<const std::string_view> value_flags);

struct EngineConnection {
  std::string address;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;  // empty: none; send as kTokenMetadataKey metadata
};

// Whole file contents; *ok is false when it cannot be opened.
std::string ReadFile(const std::string& path, bool* ok);

// Resolves `f` into a connection. Returns false with a message on `err` when
// a TLS or token file cannot be read (the caller exits with a usage error).
bool ResolveConnection(const ConnectionFlags& f, const std::string& env_engine,
                       EngineConnection* out, std::ostream& err);

}  // namespace xpu::cli

#endif  // XPU_TOOLS_XPU_CLI_CONNECTION_H_
