#include "tools/xpu_cli/connection.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"

namespace xpu::cli {

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool ResolveConnection(const ConnectionFlags& f, const std::string& env_engine,
                       EngineConnection* out, std::ostream& err) {
  out->address = !f.engine.empty() ? f.engine : !env_engine.empty() ? env_engine : kDefaultEngineAddress;
  if (f.tls) {
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
  }
  return true;
}

}  // namespace xpu::cli
