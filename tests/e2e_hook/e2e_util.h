// tests/e2e_hook/e2e_util.h — process running and report parsing for the
// end-to-end tests of the hook.
//
// Thread-safety: plain functions; Run forks, call it from the test thread.
#ifndef XPU_TESTS_E2E_HOOK_E2E_UTIL_H_
#define XPU_TESTS_E2E_HOOK_E2E_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xpu::e2e {

struct RunResult {
  bool exited = false;  // false: killed by a signal (or timed out)
  int status = -1;      // exit status when exited
  int signal = 0;       // terminating signal otherwise
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs argv[0] with `env` added to (and overriding) the environment, stdout
// and stderr captured; kills it (SIGKILL, process group) after `timeout_s`.
RunResult Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              int timeout_s);

// A fresh empty directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// "k1=v1 k2=v2 ..." words after an optional leading tag word.
using Fields = std::map<std::string, std::string>;
Fields ParseFields(const std::string& line, std::string* tag);
std::vector<std::string> ReadLines(const std::string& path);
std::string ReadFile(const std::string& path);
// Regular files in `dir` whose names start with `prefix`.
std::vector<std::string> ListFiles(const std::string& dir, const std::string& prefix);
uint64_t ToU64(const std::string& s);

}  // namespace xpu::e2e

#endif  // XPU_TESTS_E2E_HOOK_E2E_UTIL_H_
