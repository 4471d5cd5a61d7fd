#include "engine/alerting/http_client.h"

#include <curl/curl.h>

#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace xpu::engine {
namespace {

constexpr size_t kMaxResponseBytes = 64u << 20;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
struct EasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct ListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// One part of a parsed URL ("" when absent).
std::string Part(CURLU* u, CURLUPart what) {
  char* p = nullptr;
  if (curl_url_get(u, what, &p, 0) != CURLUE_OK || p == nullptr) return "";
  std::string s(p);
  curl_free(p);
  return s;
}

struct Body {
  std::string data;
  bool too_large = false;
};

size_t Collect(char* ptr, size_t size, size_t n, void* user) {
  Body* b = static_cast<Body*>(user);
  const size_t len = size * n;
  if (b->data.size() + len > kMaxResponseBytes) {
    b->too_large = true;
    return 0;  // aborts the transfer
  }
  b->data.append(ptr, len);
  return len;
}

absl::StatusOr<std::string> ReadTrimmed(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s(absl::StripAsciiWhitespace(ss.str()));
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is empty"));
  return s;
}

}  // namespace

absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  GlobalInit();
  std::unique_ptr<CURLU, UrlDeleter> u(curl_url());
  if (!u) return absl::ResourceExhaustedError("curl_url");
  if (CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0); rc != CURLUE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "': ", curl_url_strerror(rc)));
  }
  HttpUrl out;
  out.scheme = absl::AsciiStrToLower(Part(u.get(), CURLUPART_SCHEME));
  if (out.scheme != "http" && out.scheme != "https") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", url, "': only http:// and https:// URLs are supported"));
  }
  out.host = Part(u.get(), CURLUPART_HOST);
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("'", url, "': no host"));
  const std::string port = Part(u.get(), CURLUPART_PORT);
  if (port.empty()) {
    out.port = out.scheme == "https" ? 443 : 80;
  } else if (!absl::SimpleAtoi(port, &out.port) || out.port <= 0 || out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", url, "': bad port"));
  }
  out.path = Part(u.get(), CURLUPART_PATH);
  if (out.path.empty()) out.path = "/";
  if (std::string q = Part(u.get(), CURLUPART_QUERY); !q.empty()) out.path += "?" + q;
  return out;
}

absl::StatusOr<HttpAuth> ReadHttpAuth(const std::string& basic_file, const std::string& bearer_file,
                                      const std::string& what) {
  HttpAuth auth;
  if (!basic_file.empty() && !bearer_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": give a basic-auth file or a bearer-token file, not both"));
  }
  if (!basic_file.empty()) {
    absl::StatusOr<std::string> s = ReadTrimmed(basic_file, what + " basic-auth file");
    if (!s.ok()) return s.status();
    if (s->find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " basic-auth file ", basic_file, " must hold USER:PASSWORD"));
    }
    auth.basic = *std::move(s);
  }
  if (!bearer_file.empty()) {
    absl::StatusOr<std::string> s = ReadTrimmed(bearer_file, what + " bearer-token file");
    if (!s.ok()) return s.status();
    auth.bearer = *std::move(s);
  }
  return auth;
}

absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body, const HttpOptions& o) {
  absl::StatusOr<HttpUrl> parsed = ParseHttpUrl(url);  // also runs the global init
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<CURL, EasyDeleter> h(curl_easy_init());
  if (!h) return absl::ResourceExhaustedError("curl_easy_init");
  CURL* c = h.get();
  char error[CURL_ERROR_SIZE] = {0};
  Body received;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");  // no proxy from the environment
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.timeout_ms));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.timeout_ms));
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &received);
  if (!o.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, o.ca_file.c_str());
  if (!o.auth.basic.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(c, CURLOPT_USERPWD, o.auth.basic.c_str());
  } else if (!o.auth.bearer.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, o.auth.bearer.c_str());
  }
  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (!body.empty() || method == "POST") {
    headers = curl_slist_append(headers, ("Content-Type: " + o.content_type).c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  std::unique_ptr<curl_slist, ListDeleter> header_list(headers);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    const std::string detail =
        absl::StrCat(method, " ", url, ": ", error[0] != '\0' ? error : curl_easy_strerror(rc));
    if (received.too_large) {
      return absl::ResourceExhaustedError(
          absl::StrCat(method, " ", url, ": response larger than ", kMaxResponseBytes, " bytes"));
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(detail);
    if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
      return absl::InvalidArgumentError(detail);
    }
    return absl::UnavailableError(detail);
  }
  HttpResponse r;
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  r.status = static_cast<int>(status);
  r.body = std::move(received.data);
  return r;
}

absl::StatusOr<HttpResponse> HttpRequest(const std::string& method, const std::string& url,
                                         const std::string& body, const std::string& content_type,
                                         int timeout_ms) {
  HttpOptions o;
  o.content_type = content_type;
  o.timeout_ms = timeout_ms;
  return HttpRequest(method, url, body, o);
}

}  // namespace xpu::engine
