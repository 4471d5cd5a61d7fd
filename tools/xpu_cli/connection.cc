#include "tools/xpu_cli/connection.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "common/rpc/local_identity.h"

namespace xpu::cli {

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void AddConnectionOptions(CLI::App* cmd, ConnectionFlags* f) {
  const std::string group = "Connection";
  cmd->add_option(
         "--engine", f->engine,
         "engine address (default: $XPU_ENGINE, else " + std::string(kDefaultEngineAddress) + ")")
      ->type_name("HOST:PORT")
      ->group(group);
  cmd->add_flag("--tls", f->tls, "connect with TLS (system roots unless --tls-ca)")->group(group);
  cmd->add_option("--tls-ca", f->tls_ca, "CA certificate that verifies the engine (implies --tls)")
      ->type_name("PATH")
      ->group(group);
  cmd->add_option("--tls-cert", f->tls_cert,
                  "client certificate (with --tls-key) for engines that require one")
      ->type_name("PATH")
      ->group(group);
  cmd->add_option("--tls-key", f->tls_key, "client private key")->type_name("PATH")->group(group);
  cmd->add_option("--token-file", f->token_file,
                  "token (shared or per-role) for an engine elsewhere; on the engine's host you "
                  "are identified without one")
      ->type_name("PATH")
      ->group(group);
}

bool ResolveConnection(const ConnectionFlags& f, const std::string& env_engine,
                       EngineConnection* out, std::ostream& err) {
  out->address = !f.engine.empty()     ? f.engine
                 : !env_engine.empty() ? env_engine
                                       : kDefaultEngineAddress;
  if (f.tls || !f.tls_ca.empty() || !f.tls_cert.empty() || !f.tls_key.empty()) {
    grpc::SslCredentialsOptions ssl;
    bool ok = true;
    if (!f.tls_ca.empty()) ssl.pem_root_certs = ReadFile(f.tls_ca, &ok);
    if (ok && !f.tls_cert.empty()) ssl.pem_cert_chain = ReadFile(f.tls_cert, &ok);
    if (ok && !f.tls_key.empty()) ssl.pem_private_key = ReadFile(f.tls_key, &ok);
    if (!ok) {
      err << "xpu: cannot read a TLS file (--tls-ca/--tls-cert/--tls-key)\n";
      return false;
    }
    out->credentials = grpc::SslCredentials(ssl);
  } else {
    out->credentials = grpc::InsecureChannelCredentials();
  }
  out->token.clear();
  if (!f.token_file.empty()) {
    bool ok = true;
    out->token = std::string(absl::StripAsciiWhitespace(ReadFile(f.token_file, &ok)));
    if (!ok || out->token.empty()) {
      err << "xpu: cannot read token from " << f.token_file << "\n";
      return false;
    }
    return true;
  }
  // An engine on this host tells who we are by itself (its identity socket:
  // the kernel's word on our uid). Elsewhere, or an engine without one: no
  // credential, and the engine says what it needs.
  absl::StatusOr<std::string> local = rpc::FetchLocalIdentity(out->address);
  if (local.ok()) out->token = *local;
  return true;
}

}  // namespace xpu::cli
