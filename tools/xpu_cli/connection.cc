#include "tools/xpu_cli/connection.h"

#include <cstdlib>
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

bool ParseSeconds(const std::string& flag, const std::string& v, double max, double* out,
                  std::string* error) {
  char* end = nullptr;
  const double d = strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || d <= 0 || d > max) {
    *error = flag + " needs seconds in (0, " + std::to_string(static_cast<int>(max)) + "]";
    return false;
  }
  *out = d;
  return true;
}

bool IsConnectionValueFlag(std::string_view flag) {
  return flag == "--engine" || flag == "--token-file" || flag == "--tls-ca" ||
         flag == "--tls-cert" || flag == "--tls-key";
}

std::string CommandWord(const std::vector<std::string>& args,
                        absl::Span<const std::string_view> value_flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') return a;
    bool takes_value = IsConnectionValueFlag(a);
    for (std::string_view w : value_flags) takes_value = takes_value || a == w;
    if (takes_value) ++i;
  }
  return "";
}

bool ResolveConnection(const ConnectionFlags& f, const std::string& env_engine,
                       EngineConnection* out, std::ostream& err) {
  out->address = !f.engine.empty()     ? f.engine
                 : !env_engine.empty() ? env_engine
                                       : kDefaultEngineAddress;
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
