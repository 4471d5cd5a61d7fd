// The HTTP client (libcurl) against a loopback receiver that checks the
// Authorization header (testing/http_test_server.py): basic and bearer
// credentials, https with a test CA made by openssl here, and the alert
// notifier delivering through it with the receiver's credentials.
#include "engine/alerting/http_client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/json/json.h"
#include "engine/alerting/alert_notifier.h"
#include "prometheus/registry.h"

namespace xpu::engine {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A private temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/xpu-http-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The Python receiver as a child process.
class TestServer {
 public:
  TestServer(const TempDir& dir, const std::string& expect_authorization,
             const std::string& cert = "", const std::string& key = "")
      : port_file_(dir.path() + "/port"), log_(dir.path() + "/requests.jsonl") {
    unlink(port_file_.c_str());
    std::vector<std::string> args = {
        XPU_PYTHON, XPU_HTTP_TEST_SERVER, "--port-file", port_file_, "--log", log_};
    if (!expect_authorization.empty()) {
      args.insert(args.end(), {"--expect-authorization", expect_authorization});
    }
    if (!cert.empty()) args.insert(args.end(), {"--tls-cert", cert, "--tls-key", key});
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && port_ == 0; ++i) {
      std::ifstream f(port_file_);
      if (!(f >> port_)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~TestServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  // The requests received, one JSON object per line.
  std::vector<json::Json> Requests() const {
    std::vector<json::Json> out;
    std::istringstream lines(ReadAll(log_));
    for (std::string line; std::getline(lines, line);) out.push_back(json::Json::parse(line));
    return out;
  }

 private:
  std::string port_file_, log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(HttpClientTest, BasicAuthHeaderIsSent) {
  TempDir dir;
  // base64("alice:s3cr:et") — the password may hold a colon.
  TestServer server(dir, "Basic YWxpY2U6czNjcjpldA==");
  ASSERT_GT(server.port(), 0) << "test server did not start";
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v2/alerts";
  HttpOptions o;
  o.auth.basic = "alice:s3cr:et";
  absl::StatusOr<HttpResponse> r = HttpRequest("POST", url, "[]", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  o.auth.basic = "alice:wrong";
  r = HttpRequest("POST", url, "[]", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 401);
  std::vector<json::Json> reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0]["method"], "POST");
  EXPECT_EQ(reqs[0]["path"], "/api/v2/alerts");
  EXPECT_EQ(reqs[0]["content_type"], "application/json");
  EXPECT_EQ(reqs[0]["body"], "[]");
}

TEST(HttpClientTest, BearerTokenIsSent) {
  TempDir dir;
  TestServer server(dir, "Bearer tok-123");
  ASSERT_GT(server.port(), 0) << "test server did not start";
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/hook";
  HttpOptions o;
  o.auth.bearer = "tok-123";
  absl::StatusOr<HttpResponse> r = HttpRequest("POST", url, "{}", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  r = HttpRequest("GET", url, "", HttpOptions{});  // no credentials
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 401);
  std::vector<json::Json> reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0]["authorization"], "Bearer tok-123");
  EXPECT_TRUE(reqs[1]["authorization"].is_null());
}

// A self-signed certificate for 127.0.0.1 that is its own CA.
bool MakeTestCa(const TempDir& dir, std::string* cert, std::string* key) {
  *cert = dir.path() + "/ca.pem";
  *key = dir.path() + "/key.pem";
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
      " -addext subjectAltName=IP:127.0.0.1 -keyout '" +
      *key + "' -out '" + *cert + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(HttpClientTest, HttpsWithATestCa) {
  TempDir dir;
  std::string cert, key;
  ASSERT_TRUE(MakeTestCa(dir, &cert, &key)) << "openssl could not make a test certificate";
  TestServer server(dir, "Bearer t", cert, key);
  ASSERT_GT(server.port(), 0) << "test server did not start";
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port()) + "/";
  HttpOptions o;
  o.auth.bearer = "t";
  o.ca_file = cert;
  absl::StatusOr<HttpResponse> r = HttpRequest("POST", url, "{}", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  // Without the CA the certificate does not verify: no request is sent.
  o.ca_file.clear();
  r = HttpRequest("POST", url, "{}", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(server.Requests().size(), 1u);
}

TEST(HttpClientTest, NotifierDeliversWithTheReceiversCredentials) {
  TempDir dir;
  std::string cert, key;
  ASSERT_TRUE(MakeTestCa(dir, &cert, &key));
  TestServer server(dir, "Bearer hook-token", cert, key);
  ASSERT_GT(server.port(), 0) << "test server did not start";
  prometheus::Registry registry;
  AlertNotifierOptions no;
  no.webhook_url = "https://127.0.0.1:" + std::to_string(server.port()) + "/xpu";
  no.webhook_auth.bearer = "hook-token";
  no.ca_file = cert;
  AlertNotifier notifier(no, registry);
  TrackerUpdate u;
  Diagnosis d;
  d.job = "j\xC3\xBC";  // non-ASCII job name, sent as UTF-8
  d.kind = "slow_gpu";
  d.subject = "rank:1";
  d.ranks = {1};
  u.opened.push_back(d);
  notifier.Publish(u, 1);
  notifier.Drain();
  EXPECT_EQ(notifier.posted_ok(), 1u);
  EXPECT_EQ(notifier.posted_failed(), 0u);
  std::vector<json::Json> reqs = server.Requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0]["path"], "/xpu");
  json::Json body = json::Json::parse(reqs[0]["body"].get<std::string>());
  EXPECT_EQ(body["source"], "xpu-engine");
  EXPECT_EQ(body["events"][0]["job"], "j\xC3\xBC");
}

TEST(HttpClientTest, CredentialsFromFiles) {
  TempDir dir;
  const std::string basic = dir.path() + "/basic", bearer = dir.path() + "/bearer",
                    bad = dir.path() + "/bad";
  std::ofstream(basic) << "user:pass\n";
  std::ofstream(bearer) << "  tok\n";
  std::ofstream(bad) << "no-colon\n";
  absl::StatusOr<HttpAuth> a = ReadHttpAuth(basic, "", "Alertmanager");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->basic, "user:pass");
  a = ReadHttpAuth("", bearer, "webhook");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->bearer, "tok");
  EXPECT_TRUE(ReadHttpAuth("", "", "x")->empty());
  EXPECT_FALSE(ReadHttpAuth(basic, bearer, "x").ok());
  EXPECT_FALSE(ReadHttpAuth(bad, "", "x").ok());
  EXPECT_FALSE(ReadHttpAuth(dir.path() + "/missing", "", "x").ok());
}

}  // namespace
}  // namespace xpu::engine
